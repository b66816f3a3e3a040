import type { ResolvedFsdpOptions } from '../options';
import type { FsdpUnit } from './fsdp-unit';

/** Communication the main thread waited for in the last step (not overlapped with compute). */
export interface CommunicationStatistics {
  allGatherWaitMs: number;
  reductionWaitMs: number;
}

/** Gathering units for their forward and backward, and prefetching the next one. */
export class UnitGathering {
  readonly #units: readonly FsdpUnit[];
  readonly #options: ResolvedFsdpOptions;
  readonly #statistics: CommunicationStatistics;

  constructor(units: readonly FsdpUnit[], options: ResolvedFsdpOptions, statistics: CommunicationStatistics) {
    this.#units = units;
    this.#options = options;
    this.#statistics = statistics;
  }

  /** All-gathers the unit if needed and points its Parameters at full views (timed). */
  gather(unit: FsdpUnit): void {
    if (unit.state === 'unsharded') return;
    const start = performance.now();
    unit.finishUnshard(this.#options.group);
    this.#statistics.allGatherWaitMs += performance.now() - start;
  }

  /** Before the root's forward: gathers it and prefetches the first unit of the last step's order. */
  gatherRoot(root: FsdpUnit, lastOrder: readonly FsdpUnit[]): void {
    this.gather(root);
    this.prefetchAfter(root, [root, ...lastOrder]);
  }

  /** Backward reached the model's output: prefetches the last unit of `forwardOrder`. */
  prefetchFirstOfBackward(root: FsdpUnit, forwardOrder: readonly FsdpUnit[]): void {
    this.prefetchAfter(root, [root, ...[...forwardOrder].reverse()], true);
  }

  /** Before a unit's forward: gathers it and prefetches the unit after it in the last step's order. */
  gatherForForward(unit: FsdpUnit, lastOrder: readonly FsdpUnit[]): void {
    this.gather(unit);
    this.prefetchAfter(unit, lastOrder);
  }

  /**
   * The last unit of forward stays gathered (see [Note: last unit stays gathered]): with
   * `backwardPrefetch`, prefetches the unit whose backward comes after it, now.
   */
  prefetchNextOfBackward(unit: FsdpUnit, forwardOrder: readonly FsdpUnit[]): void {
    if (this.#options.backwardPrefetch) this.prefetchAfter(unit, [...forwardOrder].reverse(), true);
  }

  /**
   * Before a unit's backward: gathers it and, with `backwardPrefetch`, prefetches the unit whose
   * backward comes next (the forward order reversed).
   */
  gatherForBackward(unit: FsdpUnit, forwardOrder: readonly FsdpUnit[]): void {
    this.gather(unit);
    if (this.#options.backwardPrefetch) this.prefetchAfter(unit, [...forwardOrder].reverse(), true);
  }

  /**
   * A unit's backward is done and it resharded: with `backwardPrefetch`, prefetches the unit after
   * the one whose backward comes next (already gathered or gathering), within the limit.
   */
  prefetchAfterBackwardOf(unit: FsdpUnit, forwardOrder: readonly FsdpUnit[]): void {
    if (!this.#options.backwardPrefetch) return;
    const backwardOrder = [...forwardOrder].reverse();
    const next = backwardOrder[backwardOrder.indexOf(unit) + 1];
    if (next === undefined || next.state === 'sharded') return;
    this.prefetchAfter(next, backwardOrder, true, 'holding');
  }

  /**
   * Issues the all-gather of the unit after `unit` in `order` (prefetch), within the in-flight limit.
   *
   * [Note: in-flight all-gathers]
   * With `limitAllGathers` (default) a prefetch is issued only when no other unit is 'gathering':
   * at most one prefetched all-gather is in flight, so besides the root unit at most two units are
   * gathered at once, the running one and the next (the memory estimate's UNITS_GATHERED_AT_ONCE).
   * One more prefetch in backward: when a unit's backward is done and it resharded, the unit after
   * the next one is gathered if fewer than two non-root units hold gathered memory ('holding'),
   * before the finished unit's reduce-scatter is issued, so that all-gather does not queue behind
   * the reduce-scatter on the communication worker. The bound of two gathered units holds.
   * The last unit of forward stays gathered (see [Note: last unit stays gathered]) while the next
   * of backward is prefetched: two units, too.
   * Without the limit every prefetch is issued as soon as its predecessor starts.
   */
  private prefetchAfter(
    unit: FsdpUnit,
    order: readonly FsdpUnit[],
    always = false,
    limit: 'in-flight' | 'holding' = 'in-flight',
  ): void {
    const options = this.#options;
    if (!always && !options.forwardPrefetch) return;
    if (!options.sharding.shardParameters) return;
    const position = order.indexOf(unit);
    const next = position < 0 ? undefined : order[position + 1];
    if (next === undefined || next.state !== 'sharded') return;
    const busy =
      limit === 'holding'
        ? this.#units.filter((candidate) => !candidate.isRoot && candidate.state !== 'sharded').length >= 2
        : this.#units.some((candidate) => candidate.state === 'gathering');
    if (options.limitAllGathers && busy) return;
    next.startUnshard(options.group);
  }
}
