import { adamKernel } from './internal/kernels/adam-kernel';
import { adamSimdAvailable, adamSimdKernel, stateBesideData } from './internal/kernels/adam-simd-kernel';
import { mergeOptions } from './internal/merge-options';
import { checkBetas, checkBoolean, checkNonNegative } from './internal/validate';
import { Optimizer } from './optimizer';
import type { BaseOptions, ParamsInput } from './param-group';

export interface AdamOptions extends BaseOptions {
  betas: readonly [number, number];
  eps: number;
  weightDecay: number;
  amsgrad: boolean;
  maximize: boolean;
}

/** Adam's default hyperparameters (PyTorch's). */
export const adamDefaults: Readonly<AdamOptions> = Object.freeze({
  lr: 1e-3,
  betas: Object.freeze([0.9, 0.999] as const),
  eps: 1e-8,
  weightDecay: 0,
  amsgrad: false,
  maximize: false,
});

/** Adam and AdamW share everything but where weight decay enters. State: `expAvg`, `expAvgSq`, `maxExpAvgSq`. */
abstract class AdamFamily extends Optimizer<AdamOptions> {
  /**
   * True when weight decay is applied to the weights directly (AdamW), false when it is added to the
   * gradient (Adam).
   */
  protected abstract get decoupledWeightDecay(): boolean;

  protected validateGroup(group: AdamOptions, where: string): void {
    checkNonNegative(where, 'lr', group.lr);
    checkBetas(where, group.betas);
    checkNonNegative(where, 'eps', group.eps);
    checkNonNegative(where, 'weightDecay', group.weightDecay);
    checkBoolean(where, 'amsgrad', group.amsgrad);
    checkBoolean(where, 'maximize', group.maximize);
  }

  protected override stateBufferNames(group: AdamOptions): readonly string[] {
    return group.amsgrad ? ['expAvg', 'expAvgSq', 'maxExpAvgSq'] : ['expAvg', 'expAvgSq'];
  }

  step(): void {
    const kernel = adamSimdAvailable() ? adamSimdKernel : adamKernel;
    this.runStep(() =>
      this.forEachPrepared(true, (group, { arrays, state }) => {
        state.step += 1;
        // A new state buffer goes beside data when data lives in a kernel block ([Note: Adam in a kernel block]).
        const buffer = (name: 'expAvg' | 'expAvgSq' | 'maxExpAvgSq') =>
          state.buffers.get(name) ??
          stateBesideData(state.buffers, name, arrays.data, state.numel) ??
          state.buffer(name);
        kernel(
          arrays.data,
          arrays.grad,
          buffer('expAvg'),
          buffer('expAvgSq'),
          group.amsgrad ? buffer('maxExpAvgSq') : null,
          {
            lr: group.lr,
            beta1: group.betas[0],
            beta2: group.betas[1],
            eps: group.eps,
            weightDecay: group.weightDecay,
            decoupledWeightDecay: this.decoupledWeightDecay,
            maximize: group.maximize,
            step: state.step,
          },
        );
      }),
    );
  }
}

/** Adam with L2 weight decay added to the gradient, as `torch.optim.Adam`. */
export class Adam extends AdamFamily {
  get kind(): string {
    return 'Adam';
  }
  protected get decoupledWeightDecay(): boolean {
    return false;
  }

  constructor(params: ParamsInput<AdamOptions>, options: Partial<AdamOptions> = {}) {
    super(params, mergeOptions('Adam', adamDefaults, options));
  }
}

/** AdamW's default hyperparameters: Adam's with weight decay 0.01 (PyTorch's). */
export const adamWDefaults: Readonly<AdamOptions> = Object.freeze({ ...adamDefaults, weightDecay: 1e-2 });

/** Adam with decoupled weight decay (p ← p·(1 − lr·wd) before the step), as `torch.optim.AdamW`. */
export class AdamW extends AdamFamily {
  get kind(): string {
    return 'AdamW';
  }
  protected get decoupledWeightDecay(): boolean {
    return true;
  }

  constructor(params: ParamsInput<AdamOptions>, options: Partial<AdamOptions> = {}) {
    super(params, mergeOptions('AdamW', adamWDefaults, options));
  }
}
