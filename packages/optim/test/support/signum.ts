import { type BaseOptions, OptimError, Optimizer, type ParamsInput } from '../../src/index';

export interface SignumOptions extends BaseOptions {
  /** Momentum of the gradient average whose sign is stepped (0: signSGD). */
  momentum: number;
}

/**
 * A test-only optimizer, added through CONTRIBUTING's "add an optimizer" recipe: Signum
 * (Bernstein et al. 2018), m = momentum · m + (1 - momentum) · g, p -= lr · sign(m). Elementwise,
 * so sharded-equivalent with nothing else; its `momentumBuffer` goes through state dicts.
 */
export class Signum extends Optimizer<SignumOptions> {
  get kind(): string {
    return 'Signum';
  }

  constructor(params: ParamsInput<SignumOptions>, options: Partial<SignumOptions> = {}) {
    super(params, { lr: 1e-3, momentum: 0.9, ...options });
  }

  protected validateGroup(group: SignumOptions, where: string): void {
    for (const [key, value, upper] of [
      ['lr', group.lr, Number.POSITIVE_INFINITY],
      ['momentum', group.momentum, 1],
    ] as const) {
      if (!(value >= 0 && value < upper)) {
        throw new OptimError(`${where}: Signum ${key} ${value} is out of range.`, {
          code: 'invalid-hyperparameter',
          expected: key === 'lr' ? 'lr >= 0' : '0 <= momentum < 1',
          actual: value,
          fix: `pass a ${key} in range.`,
        });
      }
    }
  }

  step(): void {
    for (const group of this.paramGroups) {
      for (const param of group.params) {
        const prepared = this.prepare(param);
        if (prepared === null) continue;
        const { arrays, state } = prepared;
        const momentum = state.buffer('momentumBuffer');
        for (let index = 0; index < arrays.data.length; index++) {
          momentum[index] = group.momentum * momentum[index]! + (1 - group.momentum) * arrays.grad[index]!;
          arrays.data[index]! -= group.lr * Math.sign(momentum[index]!);
        }
        state.step += 1;
      }
    }
  }
}
