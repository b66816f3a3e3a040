import { encodeBfloat16 } from '@fsdp-ts/kernels';
import type { ReduceOp } from '../../types.js';

/** The array a ring works on: float32 or int32 accumulators, or raw 16-bit bfloat16 elements. */
export type WorkArray = Float32Array | Int32Array | Uint16Array;

/** `same`: elements travel as they are in the work array; `bfloat16`: float32 sent as bfloat16. */
export type Wire = 'same' | 'bfloat16';

export interface IncomingStep {
  /** Element range of the work array this step's bytes belong to. */
  start: number;
  end: number;
  mode: 'reduce' | 'copy';
  wire: Wire;
  /** Runs on each processed range before it is forwarded (final average and rounding). */
  finish?: (values: WorkArray) => void;
  /**
   * `finish` only rounds to bfloat16 (a sum's last reduce step ending in bfloat16): a bfloat16
   * wire step may fuse it ([Note: bfloat16 steps in the kernel's memory]).
   */
  finishRoundsOnly?: boolean;
  /**
   * `finish` only divides by this group size (a float32 average's last reduce step, no rounding):
   * a BLAS step may scale instead where that is exact ([Note: blas reduce steps]).
   */
  averageOver?: number;
  /** Wire to forward the processed range to the next rank in, or null to keep it. */
  forward: Wire | null;
}

export interface RingPlan {
  work: WorkArray;
  /**
   * Where the rank's own contribution lives when it is not `work` (reduce-scatter reads its
   * input without copying it): reduce steps compute work = base (op) incoming, and the initial
   * range is sent from base. Every range is reduced at most once, so base is read once.
   */
  base?: WorkArray;
  reduceOp: ReduceOp;
  /** Range this rank sends first, before anything arrives. */
  initial: { start: number; end: number; wire: Wire } | null;
  /** The initial range's wire bytes when the plan's maker has them already. */
  initialEncoded?: Uint8Array;
  /**
   * [Note: results in place] Where the results go when not the work array: element i of `work`
   * ends as `array[i - offset]` (a bfloat16 buffer's bits, or a reduce-scatter's float32
   * output). Steps that produce final values (copy steps and the last reduce step, the one with
   * `finish`) write them there as they go: a bfloat16 step in the kernel's memory writes the
   * received or summed bits (or floats) straight there, not to the work array (no decode, no
   * encode of the whole buffer, no copy afterwards); other steps copy or encode their finished
   * range there.
   */
  final?: { array: Uint16Array | Float32Array; offset: number };
  steps: IncomingStep[];
}

/** Reusable memory for one engine: aligned copies of incoming chunks, and outgoing bfloat16. */
export class RingScratch {
  private aligned = new ArrayBuffer(1 << 16);
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

  alignedCopy(bytes: Uint8Array): ArrayBuffer {
    if (this.aligned.byteLength < bytes.length) this.aligned = new ArrayBuffer(bytes.length * 2);
    new Uint8Array(this.aligned, 0, bytes.length).set(bytes);
    return this.aligned;
  }

  floats(length: number): Float32Array {
    if (this.decoded.length < length) this.decoded = new Float32Array(length * 2);
    return this.decoded.subarray(0, length);
  }
}

/** Bytes of `work[start, end)` in `wire`, ready to write (zero-copy for `same`). */
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
  /** Wire bytes this step receives. */
  readonly bytes: number;
  consume(chunk: Uint8Array): void;
  end(): void;
  /**
   * Where the next incoming bytes belong, so a native receive can write them there (then
   * `advance`): the work array for a copy step whose bytes land as they are, the SIMD kernel's
   * input region for a reduce step ([Note: simd reduce steps]); undefined for other steps.
   */
  target?(): Uint8Array;
  advance?(bytes: number): void;
}

/** The bytes a ring plan sends before anything arrives (its initial range), or null. */
export function initialBytes(plan: RingPlan, scratch: RingScratch): Uint8Array | null {
  if (plan.initial === null) return null;
  if (plan.initialEncoded !== undefined) return plan.initialEncoded;
  const { start, end, wire } = plan.initial;
  return end > start ? encodeRange(plan.base ?? plan.work, start, end, wire, scratch) : null;
}
