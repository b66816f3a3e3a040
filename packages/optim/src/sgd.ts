import { sgdKernel } from './internal/kernels/sgd-kernel';
import { mergeOptions } from './internal/merge-options';
import { checkBoolean, checkNesterov, checkNonNegative } from './internal/validate';
import { Optimizer } from './optimizer';
import type { BaseOptions, ParamsInput } from './param-group';

export interface SGDOptions extends BaseOptions {
  momentum: number;
  dampening: number;
  weightDecay: number;
  nesterov: boolean;
  maximize: boolean;
}

/** SGD's default hyperparameters (PyTorch's). */
export const sgdDefaults: Readonly<SGDOptions> = Object.freeze({
  lr: 1e-3,
  momentum: 0,
  dampening: 0,
  weightDecay: 0,
  nesterov: false,
  maximize: false,
});

/** Stochastic gradient descent with momentum, as `torch.optim.SGD`. State: `momentumBuffer`. */
export class SGD extends Optimizer<SGDOptions> {
  get kind(): string {
    return 'SGD';
  }

  constructor(params: ParamsInput<SGDOptions>, options: Partial<SGDOptions> = {}) {
    super(params, mergeOptions('SGD', sgdDefaults, options));
  }

  protected validateGroup(group: SGDOptions, where: string): void {
    checkNonNegative(where, 'lr', group.lr);
    checkNonNegative(where, 'momentum', group.momentum);
    checkNonNegative(where, 'dampening', group.dampening);
    checkNonNegative(where, 'weightDecay', group.weightDecay);
    checkBoolean(where, 'nesterov', group.nesterov);
    checkBoolean(where, 'maximize', group.maximize);
    checkNesterov(where, group.nesterov, group.momentum, group.dampening);
  }

  step(): void {
    for (const group of this.paramGroups) {
      for (const param of group.params) {
        const prepared = this.prepare(param);
        if (prepared === null) continue;
        const { arrays, state } = prepared;
        const firstStep = !state.buffers.has('momentumBuffer');
        const momentumBuffer = group.momentum === 0 ? null : state.buffer('momentumBuffer');
        sgdKernel(arrays.data, arrays.grad, momentumBuffer, firstStep, group);
        state.step += 1;
      }
    }
  }
}
