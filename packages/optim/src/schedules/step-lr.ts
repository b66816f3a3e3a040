import { checkNonNegative } from '../internal/validate';
import { LRScheduler, type SchedulableOptimizer } from './lr-scheduler';

export interface StepLROptions {
  /** Epochs between decays (> 0). */
  stepSize: number;
  /** Factor per decay (default 0.1). */
  gamma?: number;
}

/** lr = baseLr · gamma^⌊epoch / stepSize⌋ (PyTorch's StepLR, in closed form). */
export class StepLR extends LRScheduler {
  readonly stepSize: number;
  readonly gamma: number;

  constructor(optimizer: SchedulableOptimizer, options: StepLROptions) {
    super(optimizer);
    checkNonNegative('StepLR', 'stepSize', options.stepSize);
    if (!Number.isInteger(options.stepSize) || options.stepSize === 0) {
      checkNonNegative('StepLR', 'stepSize (a positive integer)', -1);
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
