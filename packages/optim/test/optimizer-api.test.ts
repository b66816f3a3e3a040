import { Adam, AdamW, LAMB, LARS, OptimError, SGD } from '@fsdp-ts/optim';
import { Parameter, TensorView } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';

function parameter(name: string, values: number[], shape = [values.length]): Parameter {
  return Parameter.fromArray(values, shape, { name });
}

function thrown(action: () => unknown): OptimError {
  try {
    action();
  } catch (error) {
    expect(error).toBeInstanceOf(OptimError);
    return error as OptimError;
  }
  throw new Error('expected an OptimError, nothing was thrown');
}

describe('param groups', () => {
  it('fills missing hyperparameters from the defaults and lets each group differ', () => {
    const encoder = parameter('encoder.weight', [1, 2]);
    const head = parameter('head.weight', [3]);
    const optimizer = new AdamW(
      [
        { params: [encoder], lr: 1e-3 },
        { params: [head], lr: 1e-2, weightDecay: 0 },
      ],
      { betas: [0.8, 0.9] },
    );
    expect(optimizer.paramGroups.map(({ lr, weightDecay, betas }) => ({ lr, weightDecay, betas }))).toEqual([
      { lr: 1e-3, weightDecay: 1e-2, betas: [0.8, 0.9] },
      { lr: 1e-2, weightDecay: 0, betas: [0.8, 0.9] },
    ]);
    expect(optimizer.parameters).toEqual([encoder, head]);
  });

  it('applies hyperparameters changed between steps (plain SGD: p -= lr·g)', () => {
    const first = parameter('first', [1, 1]);
    const second = parameter('second', [1]);
    const optimizer = new SGD([{ params: [first] }, { params: [second], lr: 0.5 }], { lr: 0.1 });
    for (const param of [first, second])
      param.grad = TensorView.fromArray([1, 1].slice(0, param.numel), param.shape);
    optimizer.step();
    optimizer.paramGroups[0]!.lr = 0.25;
    optimizer.step();
    expect(first.data.toArray()).toEqual([1 - 0.1 - 0.25, 1 - 0.1 - 0.25].map(Math.fround));
    expect(second.data.toArray()).toEqual([Math.fround(0)]);
  });

  it('rejects a parameter in two groups, naming it and both groups', () => {
    const shared = parameter('encoder.bias', [1]);
    const error = thrown(
      () => new Adam([{ params: [shared] }, { params: [parameter('other', [2]), shared], lr: 1 }]),
    );
    expect(error.code).toBe('duplicate-parameter');
    expect(error.message).toContain('encoder.bias');
    expect(error.message).toContain('param group 0');
    expect(error.message).toContain('param group 1');
    const optimizer = new SGD([shared]);
    expect(thrown(() => optimizer.addParamGroup({ params: [shared] })).code).toBe('duplicate-parameter');
    expect(thrown(() => new SGD([shared, shared])).code).toBe('duplicate-parameter');
  });

  it('rejects unknown (snake_case) and invalid hyperparameters with the expected names', () => {
    const param = parameter('p', [1]);
    const snake = thrown(() => new AdamW([param], { weight_decay: 0.1 } as never));
    expect(snake.code).toBe('unknown-hyperparameter');
    expect(snake.message).toContain('weight_decay');
    expect(snake.expected).toContain('weightDecay');
    expect(thrown(() => new Adam([{ params: [param], weight_decay: 0.1 } as never])).code).toBe(
      'unknown-hyperparameter',
    );
    expect(thrown(() => new SGD([param], { lr: -1 })).code).toBe('invalid-hyperparameter');
    expect(thrown(() => new Adam([param], { betas: [1, 0.9] })).code).toBe('invalid-hyperparameter');
    expect(thrown(() => new SGD([param], { nesterov: true })).code).toBe('invalid-hyperparameter');
    expect(thrown(() => new LARS([param], { group: {} as never })).code).toBe('invalid-hyperparameter');
    expect(thrown(() => new SGD([])).code).toBe('invalid-group');
  });
});

describe('what a step touches', () => {
  it('skips parameters whose grad is null or that do not require grad', () => {
    const withGrad = parameter('a', [1, 2]);
    const noGrad = parameter('b', [3]);
    const frozen = parameter('c', [4]);
    frozen.requiresGrad = false;
    withGrad.grad = TensorView.fromArray([1, 1], [2]);
    frozen.grad = TensorView.fromArray([1], [1]);
    const optimizer = new Adam([withGrad, noGrad, frozen], { lr: 0.1 });
    optimizer.step();
    expect(withGrad.data.toArray()).not.toEqual([1, 2]);
    expect(noGrad.data.toArray()).toEqual([3]);
    expect(frozen.data.toArray()).toEqual([4]);
    expect(Object.keys(optimizer.stateDict().state)).toEqual(['0']);
  });

  it('steps an empty view (a rank that holds none of the parameter)', () => {
    const param = parameter('w', [1, 2, 3, 4], [2, 2]);
    param.data = new TensorView(param.data.storage, 4, [0]);
    param.grad = TensorView.zeros([0]);
    for (const optimizer of [new AdamW([param]), new LAMB([param]), new SGD([param], { momentum: 0.9 })]) {
      optimizer.step();
      expect(optimizer.stateDict().state[0]!.numel).toBe(0);
    }
  });

  it('zeroGrad sets grads to null by default, or zero-fills the same views', () => {
    const param = parameter('p', [1, 2]);
    const grad = TensorView.fromArray([5, 6], [2]);
    param.grad = grad;
    const optimizer = new SGD([param]);
    optimizer.zeroGrad({ setToNull: false });
    expect(param.grad).toBe(grad);
    expect(grad.toArray()).toEqual([0, 0]);
    optimizer.zeroGrad();
    expect(param.grad).toBeNull();
  });

  it('refuses to step when data was re-sharded after the state was created', () => {
    const param = parameter('w', [1, 2, 3, 4]);
    param.grad = TensorView.fromArray([1, 1, 1, 1], [4]);
    const optimizer = new Adam([param]);
    optimizer.step();
    param.data = param.data.narrow(0, 0, 2);
    param.grad = TensorView.fromArray([1, 1], [2]);
    const error = thrown(() => optimizer.step());
    expect(error.code).toBe('state-numel-mismatch');
    expect(error.message).toContain('re-sharded');
    expect([error.expected, error.actual]).toEqual([4, 2]);
  });

  it('rejects non-float32, non-contiguous and mismatched views with what was expected', () => {
    const half = Parameter.fromArray([1, 2], [2], { dtype: 'float16', name: 'half' });
    half.grad = TensorView.fromArray([1, 1], [2], 'float16');
    expect(thrown(() => new SGD([half]).step()).code).toBe('unsupported-dtype');
    const strided = parameter('strided', [1, 2, 3, 4], [2, 2]);
    strided.data = strided.data.transpose(0, 1);
    strided.grad = TensorView.zeros([2, 2]);
    // A transposed [2, 2] view keeps the shape but is not contiguous.
    expect(thrown(() => new SGD([strided]).step()).code).toBe('not-contiguous');
    const mismatched = parameter('m', [1, 2, 3]);
    mismatched.grad = TensorView.zeros([2]);
    expect(thrown(() => new SGD([mismatched]).step()).code).toBe('grad-shape-mismatch');
  });
});
