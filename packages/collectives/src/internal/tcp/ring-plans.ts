import { finishAverage, roundToBfloat16InPlace } from '@fsdp-ts/kernels';
import type { ReduceOp } from '../../types.js';
import { segmentBounds } from '../segments.js';
import type { IncomingStep, RingPlan, Wire, WorkArray } from './ring.js';

/**
 * Ring schedules. Ring order is group rank order: rank r receives from r-1 and sends to r+1.
 *
 * [Note: ring all-reduce] Reduce-scatter then all-gather over `size` segments: at reduce step k
 * rank r sends segment r-k and receives segment r-k-1, which it adds to its own and forwards at
 * step k+1; after size-1 steps it holds the final segment r+1, which it finishes (average,
 * rounding) and forwards as the first all-gather step. So everything a rank sends after its
 * first segment is exactly what it received, once processed: each processed chunk is forwarded
 * at once. Every rank ends with the owner's bytes of each segment, so results agree bit for bit.
 */
function modulo(value: number, size: number): number {
  return ((value % size) + size) % size;
}

/**
 * What the last reduce step does to its final values: average, round to bfloat16, both, or
 * nothing. Sets `finish` and the flags that say what it does (a fused or BLAS step may then do
 * the same work its own way: `finishRoundsOnly`, `averageOver`).
 */
function setFinisher(step: IncomingStep, reduceOp: ReduceOp, size: number, roundToBfloat16: boolean): void {
  const average = reduceOp === 'avg';
  if (!average && !roundToBfloat16) return;
  step.finish = (values) => {
    if (average) finishAverage(values as Float32Array, size);
    if (roundToBfloat16) roundToBfloat16InPlace(values as Float32Array);
  };
  if (reduceOp === 'sum') step.finishRoundsOnly = true;
  if (!roundToBfloat16) step.averageOver = size;
}

export interface ReducePlanOptions {
  rank: number;
  size: number;
  reduceOp: ReduceOp;
  /** Wire of partial sums. */
  reduceWire: Wire;
  /**
   * Wire of a rank's own values: the range it sends first and the first reduce step, which
   * receives the previous rank's own values (only later steps carry partial sums). bfloat16 for
   * a bfloat16 buffer, whose values are exact in bfloat16; reduceWire otherwise.
   */
  ownWire: Wire;
  /** Wire of final values. */
  gatherWire: Wire;
  /** Round final values to bfloat16 (they travel as bfloat16, or the buffer holds bfloat16). */
  roundFinal: boolean;
}

/** Ring all-reduce of `work` in place (see [Note: ring all-reduce]). */
export function allReducePlan(work: WorkArray, options: ReducePlanOptions): RingPlan {
  const { rank, size } = options;
  const count = work.length;
  const segment = (index: number) => segmentBounds(modulo(index, size), count, size);
  const steps: IncomingStep[] = [];
  for (let k = 0; k < size - 1; k++) {
    const [start, end] = segment(rank - k - 1);
    const last = k === size - 2;
    const step: IncomingStep = {
      start,
      end,
      mode: 'reduce',
      wire: k === 0 ? options.ownWire : options.reduceWire,
      forward: last ? options.gatherWire : options.reduceWire,
    };
    if (last) setFinisher(step, options.reduceOp, size, options.roundFinal);
    steps.push(step);
  }
  for (let k = 0; k < size - 1; k++) {
    const [start, end] = segment(rank - k);
    steps.push({
      start,
      end,
      mode: 'copy',
      wire: options.gatherWire,
      forward: k < size - 2 ? options.gatherWire : null,
    });
  }
  const [start, end] = segment(rank);
  return { work, reduceOp: options.reduceOp, initial: { start, end, wire: options.ownWire }, steps };
}

/** Ring reduce-scatter of `work` (size blocks of `count`): rank r ends with block r final in work. */
export function reduceScatterPlan(work: WorkArray, count: number, options: ReducePlanOptions): RingPlan {
  const { rank, size } = options;
  const block = (index: number): [number, number] => [
    modulo(index, size) * count,
    (modulo(index, size) + 1) * count,
  ];
  const steps: IncomingStep[] = [];
  for (let k = 0; k < size - 1; k++) {
    const [start, end] = block(rank - k - 2);
    const last = k === size - 2;
    const step: IncomingStep = {
      start,
      end,
      mode: 'reduce',
      wire: k === 0 ? options.ownWire : options.reduceWire,
      forward: last ? null : options.reduceWire,
    };
    if (last) setFinisher(step, options.reduceOp, size, options.roundFinal);
    steps.push(step);
  }
  const [start, end] = block(rank - 1);
  return {
    work,
    reduceOp: options.reduceOp,
    initial: size > 1 ? { start, end, wire: options.ownWire } : null,
    steps,
  };
}

/** Ring all-gather into `work` (size blocks of `count`), whose block `rank` is already filled. */
export function allGatherPlan(
  work: WorkArray,
  count: number,
  rank: number,
  size: number,
  wire: Wire,
): RingPlan {
  const block = (index: number): [number, number] => [
    modulo(index, size) * count,
    (modulo(index, size) + 1) * count,
  ];
  const steps: IncomingStep[] = [];
  for (let k = 0; k < size - 1; k++) {
    const [start, end] = block(rank - k - 1);
    steps.push({ start, end, mode: 'copy', wire, forward: k < size - 2 ? wire : null });
  }
  const [start, end] = block(rank);
  return { work, reduceOp: 'sum', initial: { start, end, wire }, steps };
}

/** Pipelined chain from `root` around the ring; the rank before the root does not forward. */
export function broadcastPlan(
  work: WorkArray,
  rank: number,
  size: number,
  root: number,
  wire: Wire,
): RingPlan {
  if (rank === root)
    return { work, reduceOp: 'sum', initial: { start: 0, end: work.length, wire }, steps: [] };
  const last = modulo(rank + 1, size) === root;
  return {
    work,
    reduceOp: 'sum',
    initial: null,
    steps: [{ start: 0, end: work.length, mode: 'copy', wire, forward: last ? null : wire }],
  };
}
