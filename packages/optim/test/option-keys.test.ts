import { Adam, AdamW, LAMB, LARS, LinearWarmupCosineLR, OptimError, SGD, StepLR } from '@fsdp-ts/optim';
import { Parameter } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';

function parameter(): Parameter {
  return Parameter.fromArray([1, 2], [2], { name: 'p' });
}

function thrown(action: () => unknown): OptimError {
  try {
    action();
  } catch (error) {
    if (error instanceof OptimError) return error;
    throw error;
  }
  throw new Error('expected an OptimError, nothing was thrown');
}

describe('optimizer, param-group, schedule and state-dict options reject unknown keys', () => {
  it('names the nearest hyperparameter, in the constructor and in a param group, undefined values too', () => {
    const typo = thrown(() => new AdamW([parameter()], { weightDecy: 0.1 } as never));
    expect(typo.code).toBe('unknown-hyperparameter');
    expect(typo.message).toContain("AdamW got an unknown option: 'weightDecy' (did you mean 'weightDecay'?)");
    const snake = thrown(() => new SGD([parameter()], { weight_decay: 0.1 } as never));
    expect(snake.message).toContain("did you mean 'weightDecay'?");
    const group = thrown(() => new Adam([{ params: [parameter()], learningRate: 0.1 } as never]));
    expect(group.code).toBe('unknown-hyperparameter');
    expect(group.message).toContain('param group 0 of Adam');
    const undefinedValue = thrown(() => new SGD([parameter()], { momentun: undefined } as never));
    expect(undefinedValue.message).toContain("did you mean 'momentum'?");
  });

  it("maps torch.optim's and tfjs's names to fsdp-ts's", () => {
    const cases: [() => unknown, string][] = [
      [() => new Adam([parameter()], { learningRate: 0.1 } as never), 'lr here'],
      [() => new Adam([parameter()], { beta1: 0.8 } as never), 'betas: [beta1, beta2]'],
      [() => new Adam([parameter()], { epsilon: 1e-6 } as never), 'eps here'],
      [() => new Adam([parameter()], { decoupled_weight_decay: true } as never), 'use AdamW'],
      [() => new AdamW([parameter()], { foreach: true } as never), 'no equivalent'],
      [() => new LAMB([parameter()], { max_grad_norm: 1 } as never), 'clipGradNorm'],
      [() => new LARS([parameter()], { trust_coeff: 0.001 } as never), 'trustCoefficient'],
      [() => new LAMB([parameter()], { process_group: {} } as never), 'group here'],
    ];
    for (const [action, equivalent] of cases) expect(thrown(action).message).toContain(equivalent);
    // fsdp-ts's own keys (and LAMB's group) are accepted.
    expect(new LAMB([parameter()], { lr: 0.1, trustClip: true }).defaults.lr).toBe(0.1);
  });

  it('checks zeroGrad, stateDict and the schedules', () => {
    const optimizer = new SGD([parameter()], { lr: 0.1 });
    const zero = thrown(() => optimizer.zeroGrad({ set_to_none: false } as never));
    expect(zero.code).toBe('unknown-option');
    expect(zero.message).toContain('setToNull');
    expect(thrown(() => optimizer.stateDict({ clone: false } as never)).code).toBe('unknown-option');
    expect(
      thrown(() => optimizer.loadStateDict(optimizer.stateDict(), { copyy: true } as never)).message,
    ).toContain("did you mean 'copy'?");
    expect(thrown(() => new StepLR(optimizer, { step_size: 2 } as never)).message).toContain(
      "PyTorch's step_size is stepSize here",
    );
    expect(
      thrown(() => new LinearWarmupCosineLR(optimizer, { warmupSteps: 1, totalSteps: 4, minLr: 0 } as never))
        .message,
    ).toContain("did you mean 'minLrRatio'?");
  });
});
