import type { OptionKeys } from '@fsdp-ts/errors';
import { OptimError } from '../errors';
import { checkOptimKeys } from '../internal/merge-options';
import { checkNonNegative } from '../internal/validate';
import { LRScheduler, type SchedulableOptimizer } from './lr-scheduler';

/** Options of LinearWarmupCosineLR. */
export interface LinearWarmupCosineLROptions {
  /** Steps of linear warm-up from 0 to the base lr. */
  warmupSteps: number;
  /** Step at which the cosine reaches its floor; the lr stays there afterwards. */
  totalSteps: number;
  /** The floor as a fraction of the base lr (default 0). */
  minLrRatio?: number;
}

/** The keys of LinearWarmupCosineLROptions ([Note: option keys] in @fsdp-ts/errors). */
const linearWarmupCosineLROptionKeys = {
  warmupSteps: true,
  totalSteps: true,
  minLrRatio: true,
} as const satisfies OptionKeys<LinearWarmupCosineLROptions>;

/**
 * Linear warm-up then half-cosine decay, per step (Hugging Face's `get_cosine_schedule_with_warmup`,
 * plus a floor and a clamp after `totalSteps`):
 *   step < warmup:  lr = base · step / warmup
 *   otherwise:      p = min(1, (step − warmup) / max(1, total − warmup))
 *                   lr = base · (minLrRatio + (1 − minLrRatio) · ½(1 + cos(πp)))
 */
export class LinearWarmupCosineLR extends LRScheduler {
  readonly warmupSteps: number;
  readonly totalSteps: number;
  readonly minLrRatio: number;

  constructor(optimizer: SchedulableOptimizer, options: LinearWarmupCosineLROptions) {
    checkOptimKeys('LinearWarmupCosineLR', options, linearWarmupCosineLROptionKeys, 'unknown-option', {
      num_warmup_steps: "Hugging Face's num_warmup_steps is warmupSteps here",
      num_training_steps: "Hugging Face's num_training_steps is totalSteps here",
      eta_min: 'minLrRatio here: the floor as a fraction of the base lr, not an absolute lr',
    });
    super(optimizer);
    const { warmupSteps, totalSteps, minLrRatio = 0 } = options;
    checkNonNegative('LinearWarmupCosineLR', 'warmupSteps', warmupSteps);
    checkNonNegative('LinearWarmupCosineLR', 'totalSteps', totalSteps);
    if (totalSteps < warmupSteps || !(minLrRatio >= 0 && minLrRatio <= 1)) {
      throw new OptimError(
        'LinearWarmupCosineLR: needs warmupSteps <= totalSteps and 0 <= minLrRatio <= 1.',
        {
          code: 'invalid-hyperparameter',
          expected: 'warmupSteps <= totalSteps, minLrRatio in [0, 1]',
          actual: options,
          fix: 'count totalSteps including the warm-up, and give the floor as a fraction of the base lr.',
        },
      );
    }
    this.warmupSteps = warmupSteps;
    this.totalSteps = totalSteps;
    this.minLrRatio = minLrRatio;
    this.applyLearningRates();
  }

  protected lrAt(epoch: number, baseLr: number): number {
    if (epoch < this.warmupSteps) return (baseLr * epoch) / this.warmupSteps;
    const progress = Math.min(
      1,
      (epoch - this.warmupSteps) / Math.max(1, this.totalSteps - this.warmupSteps),
    );
    const cosine = 0.5 * (1 + Math.cos(Math.PI * progress));
    return baseLr * (this.minLrRatio + (1 - this.minLrRatio) * cosine);
  }
}
