import { encodeBfloat16, finishAverage, roundToBfloat16InPlace } from '@fsdp-ts/kernels';
import type { ReduceOp } from '../../types.js';
import { segmentBounds } from '../aliasing.js';

/** float32 or int32 accumulators, or raw 16-bit bfloat16 elements. */
export type WorkArray = Float32Array | Int32Array | Uint16Array;

/** `same`: elements travel as they are in the work array; `bfloat16`: float32 sent as bfloat16. */
export type Wire = 'same' | 'bfloat16';

export interface IncomingStep {
  /** Element range of the work array. */
  start: number;
  end: number;
  mode: 'reduce' | 'copy';
  wire: Wire;
  /** Runs on each processed range before it is forwarded (final average and rounding). */
  finish?: (values: WorkArray) => void;
  /** `finish` only rounds to bfloat16: a bfloat16 step may fuse it ([Note: bfloat16 steps in the kernel's memory]). */
  finishRoundsOnly?: boolean;
  /** `finish` only divides by this size: a BLAS step may scale instead ([Note: blas reduce steps]). */
  averageOver?: number;
  /** Wire to forward the processed range in, or null to keep it. */
  forward: Wire | null;
}

export interface RingPlan {
  work: WorkArray;
  /** This rank's contribution when not `work` (reduce-scatter's input): reduce steps compute work = base (op) incoming. */
  base?: WorkArray;
  reduceOp: ReduceOp;
  initial: { start: number; end: number; wire: Wire } | null;
  initialEncoded?: Uint8Array;
  /**
   * [Note: results in place] Where results go when not the work array: element i of `work` ends
   * as `array[i - offset]` (a bfloat16 buffer's bits, or a reduce-scatter's float32 output). Steps
   * that produce final values (copy steps, the last reduce step) write them there as they go, so
   * nothing is decoded, encoded or copied afterwards.
   */
  final?: { array: Uint16Array | Float32Array; offset: number };
  steps: IncomingStep[];
}

/** One engine's reusable memory: the general steps' receive region, outgoing bfloat16. */
export class RingScratch {
  private region: Uint8Array | undefined;
  private decoded = new Float32Array(1 << 14);
  private staging = new Uint16Array(0);
  private stagingUsed = 0;

  /** Forgets outgoing staging; call only after every write of the previous op was flushed. */
  resetStaging(elements: number): void {
    if (this.staging.length < elements) this.staging = new Uint16Array(elements);
    this.stagingUsed = 0;
  }

  /** The next `length` elements of outgoing staging (valid until resetStaging). */
  takeStaging(length: number): Uint16Array {
    if (this.stagingUsed + length > this.staging.length) {
      // [Note: staging growth] Never reuse memory a pending write may still reference: grow fresh.
      this.staging = new Uint16Array(Math.max(this.staging.length * 2, length));
      this.stagingUsed = 0;
    }
    const view = this.staging.subarray(this.stagingUsed, this.stagingUsed + length);
    this.stagingUsed += length;
    return view;
  }

  /** Where general steps receive (one step runs at a time), as large as a native receive. */
  receiveRegion(): Uint8Array {
    this.region ??= new Uint8Array(1 << 20);
    return this.region;
  }

  floats(length: number): Float32Array {
    if (this.decoded.length < length) this.decoded = new Float32Array(length * 2);
    return this.decoded.subarray(0, length);
  }
}

/** Bytes of `work[start, end)` in `wire` (zero-copy for `same`). */
export function encodeRange(
  work: WorkArray,
  start: number,
  end: number,
  wire: Wire,
  scratch: RingScratch,
): Uint8Array {
  if (wire === 'same') {
    const size = work.BYTES_PER_ELEMENT;
    return new Uint8Array(work.buffer, work.byteOffset + start * size, (end - start) * size);
  }
  const staging = scratch.takeStaging(end - start);
  encodeBfloat16((work as Float32Array).subarray(start, end), staging);
  return new Uint8Array(staging.buffer, staging.byteOffset, staging.byteLength);
}

/** A step's incoming bytes, fed in order; `end()` after the last sends what is left to forward. */
export interface StepConsumer {
  readonly bytes: number;
  consume(chunk: Uint8Array): void;
  end(): void;
  /** Where the next incoming bytes belong, for a native receive (then `advance`); undefined for steps that decode. */
  target?(): Uint8Array;
  advance?(bytes: number): void;
}

/** The plan's initial range as wire bytes, or null. */
export function initialBytes(plan: RingPlan, scratch: RingScratch): Uint8Array | null {
  if (plan.initial === null) return null;
  if (plan.initialEncoded !== undefined) return plan.initialEncoded;
  const { start, end, wire } = plan.initial;
  return end > start ? encodeRange(plan.base ?? plan.work, start, end, wire, scratch) : null;
}

/**
 * [Note: ring all-reduce] Rank r receives from r-1 and sends to r+1. Reduce-scatter then all-gather over `size` segments: at reduce step k
 * rank r receives segment r-k-1, adds its own and forwards it at step k+1; after size-1 steps it
 * holds segment r+1 final, finishes it (average, rounding) and forwards it as the first gather
 * step. Every rank ends with the owner's bytes of each segment, so results agree bit for bit.
 */
function modulo(value: number, size: number): number {
  return ((value % size) + size) % size;
}

function block(index: number, count: number, size: number): [number, number] {
  return [modulo(index, size) * count, (modulo(index, size) + 1) * count];
}

/** The last reduce step's `finish` (average, round, both or nothing) and the flags saying which. */
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
  reduceWire: Wire;
  /** Wire of a rank's own values (initial range, first reduce step): bfloat16 for a bfloat16 buffer. */
  ownWire: Wire;
  gatherWire: Wire;
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
  const steps: IncomingStep[] = [];
  for (let k = 0; k < size - 1; k++) {
    const [start, end] = block(rank - k - 2, count, size);
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
  const [start, end] = block(rank - 1, count, size);
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
  const steps: IncomingStep[] = [];
  for (let k = 0; k < size - 1; k++) {
    const [start, end] = block(rank - k - 1, count, size);
    steps.push({ start, end, mode: 'copy', wire, forward: k < size - 2 ? wire : null });
  }
  const [start, end] = block(rank, count, size);
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
