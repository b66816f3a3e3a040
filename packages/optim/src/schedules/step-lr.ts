import type { OptionKeys } from '@fsdp-ts/errors';
import { OptimError } from '../errors';
import { checkOptimKeys } from '../internal/merge-options';
import { checkNonNegative } from '../internal/validate';
import { LRScheduler, type SchedulableOptimizer } from './lr-scheduler';

/** Options of StepLR. */
export interface StepLROptions {
  /** Epochs between decays (> 0). */
  stepSize: number;
  /** Factor per decay (default 0.1). */
  gamma?: number;
}

/** The keys of StepLROptions ([Note: option keys] in @fsdp-ts/errors). */
const stepLROptionKeys = { stepSize: true, gamma: true } as const satisfies OptionKeys<StepLROptions>;

/** lr = baseLr · gamma^⌊epoch / stepSize⌋ (PyTorch's StepLR, in closed form). */
export class StepLR extends LRScheduler {
  readonly stepSize: number;
  readonly gamma: number;

  constructor(optimizer: SchedulableOptimizer, options: StepLROptions) {
    checkOptimKeys('StepLR', options, stepLROptionKeys, 'unknown-option', {
      step_size: "PyTorch's step_size is stepSize here",
    });
    super(optimizer);
    if (!Number.isInteger(options.stepSize) || options.stepSize < 1) {
      throw new OptimError(`StepLR: invalid stepSize ${options.stepSize}.`, {
        code: 'invalid-hyperparameter',
        expected: 'a positive integer number of epochs',
        actual: options.stepSize,
        fix: 'pass stepSize >= 1, e.g. 30.',
      });
    }
    this.stepSize = options.stepSize;
    this.gamma = options.gamma ?? 0.1;
    checkNonNegative('StepLR', 'gamma', this.gamma);
    this.applyLearningRates();
  }

  protected lrAt(epoch: number, baseLr: number): number {
    return baseLr * this.gamma ** Math.floor(epoch / this.stepSize);
  }
}
