import { OptimError } from '../errors';
import { LRScheduler, type SchedulableOptimizer } from './lr-scheduler';

/** A factor of the base lr for an epoch. */
export type LRLambda = (epoch: number) => number;

/** lr = baseLr · lrLambda(epoch), one function for all groups or one per group (PyTorch's LambdaLR). */
export class LambdaLR extends LRScheduler {
  private readonly lambdas: LRLambda[];

  constructor(optimizer: SchedulableOptimizer, lrLambda: LRLambda | readonly LRLambda[]) {
    super(optimizer);
    const count = optimizer.paramGroups.length;
    if (typeof lrLambda !== 'function' && lrLambda.length !== count) {
      throw new OptimError(`LambdaLR: ${lrLambda.length} functions for ${count} param groups.`, {
        code: 'invalid-hyperparameter',
        expected: count,
        actual: lrLambda.length,
        fix: 'pass one function, or exactly one per param group.',
      });
    }
    this.lambdas = typeof lrLambda === 'function' ? new Array<LRLambda>(count).fill(lrLambda) : [...lrLambda];
    this.applyLearningRates();
  }

  protected lrAt(epoch: number, baseLr: number, groupIndex: number): number {
    return baseLr * this.lambdas[groupIndex]!(epoch);
  }
}
