import { OptimError } from '../errors';

/** What a schedule needs of an optimizer: groups with a mutable `lr`. Every Optimizer is one. */
export interface SchedulableOptimizer {
  readonly paramGroups: readonly { lr: number }[];
}

/** A scheduler's state dict. */
export interface LRSchedulerStateDict {
  lastEpoch: number;
  baseLrs: number[];
}

/**
 * The base of the LR schedules. As in PyTorch: constructing a scheduler records each group's lr as
 * its base lr and sets the lr for epoch 0; each `step()` (call it after `optimizer.step()`) advances
 * the epoch by one and writes `lrAt(epoch)` into every group's `lr`. Schedules are closed-form in
 * the epoch, so a loaded state dict resumes exactly.
 */
export abstract class LRScheduler {
  readonly optimizer: SchedulableOptimizer;
  /** Each group's lr when the scheduler was made (PyTorch's `base_lrs`). */
  readonly baseLrs: number[];
  /** Number of `step()` calls so far (0 right after construction). */
  lastEpoch = 0;

  constructor(optimizer: SchedulableOptimizer) {
    this.optimizer = optimizer;
    this.baseLrs = optimizer.paramGroups.map((group) => group.lr);
  }

  /** The lr of group `groupIndex` at `epoch`, given its base lr. */
  protected abstract lrAt(epoch: number, baseLr: number, groupIndex: number): number;

  /** Advances one epoch (or step, for per-iteration schedules) and updates every group's lr. */
  step(): void {
    this.lastEpoch += 1;
    this.applyLearningRates();
  }

  /** The lr of each group as last set by this scheduler. */
  getLastLr(): number[] {
    return this.baseLrs.map((baseLr, index) => this.lrAt(this.lastEpoch, baseLr, index));
  }

  /** The scheduler's state dict. */
  stateDict(): LRSchedulerStateDict {
    return { lastEpoch: this.lastEpoch, baseLrs: [...this.baseLrs] };
  }

  /** Loads a state dict returned by `stateDict`. */
  loadStateDict(stateDict: LRSchedulerStateDict): void {
    if (stateDict.baseLrs.length !== this.baseLrs.length) {
      throw new OptimError(
        `LRScheduler.loadStateDict: ${stateDict.baseLrs.length} base lrs for ${this.baseLrs.length} param groups.`,
        {
          code: 'state-dict-mismatch',
          expected: this.baseLrs.length,
          actual: stateDict.baseLrs.length,
          fix: 'load a scheduler state saved for an optimizer with the same param groups.',
        },
      );
    }
    this.lastEpoch = stateDict.lastEpoch;
    this.baseLrs.splice(0, this.baseLrs.length, ...stateDict.baseLrs);
    this.applyLearningRates();
  }

  /** Subclasses call this at the end of their constructor (after their own fields are set). */
  protected applyLearningRates(): void {
    const groups = this.optimizer.paramGroups;
    if (groups.length !== this.baseLrs.length) {
      throw new OptimError(
        `LRScheduler: the optimizer has ${groups.length} param groups, the scheduler was made for ${this.baseLrs.length}.`,
        {
          code: 'invalid-group',
          expected: this.baseLrs.length,
          actual: groups.length,
          fix: 'create the scheduler after the last addParamGroup().',
        },
      );
    }
    groups.forEach((group, index) => {
      group.lr = this.lrAt(this.lastEpoch, this.baseLrs[index]!, index);
    });
  }
}
