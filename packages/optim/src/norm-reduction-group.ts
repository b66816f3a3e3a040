/** What `NormReductionGroup.allReduce` returns: a handle whose `wait()` blocks until the sum is in place. */
export interface NormReductionWork {
  /** Waits until the reduction is done. */
  wait(): void;
}

/**
 * The part of a process group LAMB and LARS need: a synchronous-to-wait, in-place sum of a small
 * Float32Array across ranks. Typed structurally so `@fsdp-ts/collectives`' `ProcessGroup` (whose
 * `allReduce(buffer, { op })` returns a `Work` with a blocking `wait()`) satisfies it, and so do
 * test harnesses, without this package importing a collectives implementation.
 */
export interface NormReductionGroup {
  /** Number of ranks. With 1 the reduction is skipped. */
  readonly size: number;
  /** Sums `buffer` across the group in place. */
  allReduce(buffer: Float32Array, options: { op: 'sum' }): NormReductionWork;
}
