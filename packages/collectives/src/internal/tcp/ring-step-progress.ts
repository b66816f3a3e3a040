import { encodeBfloat16 } from '@fsdp-ts/kernels';
import {
  encodeRange,
  type IncomingStep,
  type RingPlan,
  type RingScratch,
  type Wire,
  type WorkArray,
} from './ring.js';

/** Forwarded bytes per write (see [Note: forward batching]). */
const FORWARD_BATCH_BYTES = 256 * 1024;

/** Bytes per element of `work` in `wire`. */
export function wireBytes(work: WorkArray, wire: Wire): number {
  return wire === 'bfloat16' ? 2 : work.BYTES_PER_ELEMENT;
}

/**
 * Feeds a socket read into a step's receive region: copies as much of `chunk` as the region has
 * room for after its `filled()` bytes, lets `advance` apply those bytes (it moves what is left to
 * the region's front and lowers `filled()`), and repeats until the chunk is used up. The step
 * kinds that receive into a kernel's region (bfloat16, SIMD reduce) consume this way.
 */
export function feedRegion(
  chunk: Uint8Array,
  region: Uint8Array,
  filled: () => number,
  advance: (bytes: number) => void,
): void {
  let rest = chunk;
  while (rest.length > 0) {
    const take = Math.min(rest.length, region.length - filled());
    region.set(rest.subarray(0, take), filled());
    advance(take);
    rest = rest.subarray(take);
  }
}

/**
 * How far one incoming step got: the elements of the work array processed so far, those already
 * forwarded to the next rank, and the writes of final values ([Note: results in place]). Every
 * step kind (ring-steps.ts) advances it as its bytes are applied.
 *
 * [Note: forward batching] Processed ranges are contiguous in the work array, so they are
 * forwarded as one write per FORWARD_BATCH_BYTES instead of one per socket read: each write is a
 * send() through the loopback TCP stack, and fewer, larger ones cost less CPU per byte.
 */
export class StepProgress {
  /** The next element of the work array this step's bytes fill (elements, not bytes). */
  #position: number;
  /** Elements before this one were forwarded. */
  #forwardedUpTo: number;
  /** The wire processed ranges go to the next rank in, or null when nothing is forwarded. */
  readonly forwardWire: Wire | null;
  /** Wire bytes per forwarded element; 0 when nothing is forwarded. */
  readonly #forwardBytes: number;
  /** Where this step's final values go, when not the work array ([Note: results in place]). */
  readonly final: RingPlan['final'];

  constructor(
    private readonly plan: RingPlan,
    private readonly step: IncomingStep,
    private readonly forward: ((bytes: Uint8Array) => void) | null,
    private readonly scratch: RingScratch,
  ) {
    this.#position = step.start;
    this.#forwardedUpTo = step.start;
    this.forwardWire = forward === null ? null : step.forward;
    this.#forwardBytes = this.forwardWire === null ? 0 : wireBytes(plan.work, this.forwardWire);
    this.final =
      plan.final !== undefined && (step.mode === 'copy' || step.finish !== undefined)
        ? plan.final
        : undefined;
  }

  get position(): number {
    return this.#position;
  }

  /** `count` more elements were processed. */
  advance(count: number): void {
    this.#position += count;
  }

  /** `filled` bytes of the step landed in place: whole elements among them were processed. */
  filledInPlace(filled: number): void {
    this.#position = this.step.start + Math.floor(filled / this.plan.work.BYTES_PER_ELEMENT);
  }

  /** Whether a full batch of processed bytes waits to be forwarded ([Note: forward batching]). */
  batchDue(): boolean {
    return (this.#position - this.#forwardedUpTo) * this.#forwardBytes >= FORWARD_BATCH_BYTES;
  }

  /** See [Note: results in place]; `values` is work[position, position + length). */
  writeFinal(values: WorkArray): void {
    const final = this.final;
    if (final === undefined) return;
    const from = this.#position - final.offset;
    const into = final.array.subarray(from, from + values.length);
    if (into instanceof Uint16Array) encodeBfloat16(values as Float32Array, into);
    else into.set(values as Float32Array);
  }

  /** Forwards what was processed since the last forward, encoded from the work array. */
  flush(): void {
    if (this.forwardWire === null || this.#position === this.#forwardedUpTo) return;
    this.forward!(
      encodeRange(this.plan.work, this.#forwardedUpTo, this.#position, this.forwardWire, this.scratch),
    );
    this.#forwardedUpTo = this.#position;
  }

  /** Forwards what was processed since the last forward from `encoded`, the step's bfloat16 bits. */
  flushEncoded(encoded: Uint16Array): void {
    if (this.#position === this.#forwardedUpTo) return;
    const from = this.#forwardedUpTo - this.step.start;
    const length = this.#position - this.#forwardedUpTo;
    this.forward!(new Uint8Array(encoded.buffer, encoded.byteOffset + from * 2, length * 2));
    this.#forwardedUpTo = this.#position;
  }
}
