import type { ReduceOp } from '../../types.js';
import { addBfloat16Into, decodeBfloat16, encodeBfloat16 } from '../bfloat16.js';
import { BFLOAT16_REGIONS, bfloat16Kernels, SIMD_BLOCK } from '../bfloat16-simd.js';
import { type AccumulatorArray, reduceInto, reducePair } from '../reduce-kernels.js';
import { PLACEMENT_MINIMUM, placementShift } from '../scratch-placement.js';
import { REDUCE_BLOCK, REDUCE_REGIONS, reduceKernels } from '../shm/reduce-simd.js';
import { countReduceStep, type NativeReduce } from './native-blas.js';
import type { PeerLink } from './peer-link.js';

/** The array a ring works on: float32 or int32 accumulators, or raw 16-bit bfloat16 elements. */
export type WorkArray = Float32Array | Int32Array | Uint16Array;

/** Forwarded bytes per write (see [Note: forward batching]). */
const FORWARD_BATCH_BYTES = 256 * 1024;

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

function wireBytes(work: WorkArray, wire: Wire): number {
  return wire === 'bfloat16' ? 2 : work.BYTES_PER_ELEMENT;
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

function typedView(
  work: WorkArray,
  wire: Wire,
  buffer: ArrayBufferLike,
  byteOffset: number,
  length: number,
): WorkArray {
  if (wire === 'bfloat16' || work instanceof Uint16Array) return new Uint16Array(buffer, byteOffset, length);
  if (work instanceof Int32Array) return new Int32Array(buffer, byteOffset, length);
  return new Float32Array(buffer, byteOffset, length);
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

/**
 * Applies one step's bytes to the work array as they arrive (reduce or copy) and forwards the
 * processed ranges through `forward`: sending, receiving and reducing overlap at the granularity
 * of the socket's reads.
 *
 * [Note: forward batching] Processed ranges are contiguous in the work array, so they are
 * forwarded as one write per FORWARD_BATCH_BYTES instead of one per socket read: each write is a
 * send() through the loopback TCP stack, and fewer, larger ones cost less CPU per byte.
 */
export function stepConsumer(
  plan: RingPlan,
  step: IncomingStep,
  forward: ((bytes: Uint8Array) => void) | null,
  scratch: RingScratch,
  native?: NativeReduce,
): StepConsumer {
  const { work } = plan;
  const elementBytes = wireBytes(work, step.wire);
  const carry = new Uint8Array(4);
  let carryLength = 0;
  let position = step.start;
  const base = step.mode === 'reduce' ? plan.base : undefined;
  const forwardWire = forward === null ? null : step.forward;
  const forwardBytes = forwardWire === null ? 0 : wireBytes(work, forwardWire);
  let forwardedUpTo = step.start;
  const final =
    plan.final !== undefined && (step.mode === 'copy' || step.finish !== undefined) ? plan.final : undefined;
  /** See [Note: results in place]; `values` is work[position, position + length). */
  const writeFinal = (values: WorkArray): void => {
    if (final === undefined) return;
    const from = position - final.offset;
    const into = final.array.subarray(from, from + values.length);
    if (into instanceof Uint16Array) encodeBfloat16(values as Float32Array, into);
    else into.set(values as Float32Array);
  };
  const flush = (): void => {
    if (forwardWire === null || position === forwardedUpTo) return;
    forward!(encodeRange(work, forwardedUpTo, position, forwardWire, scratch));
    forwardedUpTo = position;
  };
  if (step.mode === 'copy' && step.wire === 'same' && step.finish === undefined) {
    // Bytes land in place, whole elements or not: no carry, no aligned copies.
    const size = work.BYTES_PER_ELEMENT;
    const bytes = new Uint8Array(
      work.buffer,
      work.byteOffset + step.start * size,
      (step.end - step.start) * size,
    );
    let filled = 0;
    const advance = (count: number): void => {
      filled += count;
      position = step.start + Math.floor(filled / size);
      if ((position - forwardedUpTo) * forwardBytes >= FORWARD_BATCH_BYTES) flush();
    };
    return {
      bytes: bytes.length,
      consume: (chunk) => {
        bytes.set(chunk, filled);
        advance(chunk.length);
      },
      end: flush,
      target: () => bytes.subarray(filled),
      advance,
    };
  }
  const bfloat16 =
    step.wire === 'bfloat16' &&
    work instanceof Float32Array &&
    ((step.mode === 'copy' && step.finish === undefined) ||
      (step.finishRoundsOnly === true && plan.reduceOp === 'sum'))
      ? bfloat16Kernels()
      : null;
  if (bfloat16 !== null) {
    // [Note: bfloat16 steps in the kernel's memory] bfloat16 bytes land in the bfloat16
    // kernel's input region (a native receive writes them there), and one kernel pass per block
    // turns them into the work array's floats: a copy step decodes them; a sum's last reduce
    // step adds them to this rank's own values and rounds the sums to bfloat16, writing both
    // the rounded floats and their bfloat16 bits. What is forwarded in bfloat16 is copied from
    // the kernel's memory to outgoing staging (the received bits, or the sums' bits) and sent
    // from there, never encoded again from the work array.
    const kernels = bfloat16;
    const own = (plan.base ?? work) as Float32Array;
    const copy = step.mode === 'copy';
    const encoded = forwardWire === 'bfloat16' ? scratch.takeStaging(step.end - step.start) : null;
    // [Note: scratch placement]: blocks of whole regions keep the arrays' page offsets, so the
    // regions move off them for the step, as placed at its first element.
    const bitsRegion = copy ? BFLOAT16_REGIONS.input : BFLOAT16_REGIONS.encoded;
    const finalStart = final === undefined ? 0 : step.start - final.offset;
    const pairs: [number, ArrayBufferView][] = [];
    if (!copy) pairs.push([BFLOAT16_REGIONS.output, own.subarray(step.start)]);
    if (encoded !== null) pairs.push([bitsRegion, encoded]);
    if (final?.array instanceof Uint16Array) pairs.push([bitsRegion, final.array.subarray(finalStart)]);
    else if (final !== undefined) pairs.push([BFLOAT16_REGIONS.output, final.array.subarray(finalStart)]);
    else pairs.push([BFLOAT16_REGIONS.output, work.subarray(step.start)]);
    const shift =
      step.end - step.start < PLACEMENT_MINIMUM
        ? 0
        : placementShift(
            pairs.map(([region]) => region),
            pairs.map(([, array]) => array),
          );
    const views = kernels.at(shift);
    const inputBytes = new Uint8Array(views.inputHalves.buffer, views.inputHalves.byteOffset, SIMD_BLOCK * 2);
    // [Note: fast bfloat16 steps forward bfloat16] `flushEncoded` falls back to `flush`, which
    // encodes from the work array; when results land in the caller's buffer (`final`) this path
    // does not write the work array, so such a step may forward only bfloat16 (from `encoded`)
    // or nothing. No plan builds another combination today; this keeps one from sending stale values.
    if (final !== undefined && forwardWire !== null && forwardWire !== 'bfloat16') {
      throw new Error(
        `ring step [${step.start}, ${step.end}): a bfloat16 step with results in place forwards ${forwardWire}, breaking [Note: fast bfloat16 steps forward bfloat16]`,
      );
    }
    const flushEncoded = (): void => {
      if (encoded === null) {
        flush();
        return;
      }
      if (position === forwardedUpTo) return;
      const from = forwardedUpTo - step.start;
      forward!(new Uint8Array(encoded.buffer, encoded.byteOffset + from * 2, (position - forwardedUpTo) * 2));
      forwardedUpTo = position;
    };
    let pending = 0;
    const advance = (count: number): void => {
      pending += count;
      const whole = Math.floor(pending / 2);
      if (whole === 0) return;
      if (!copy) {
        views.outputFloats.set(own.subarray(position, position + whole));
        kernels.addRound(whole, shift);
      }
      const bits = (copy ? views.inputHalves : views.encodedHalves).subarray(0, whole);
      encoded?.set(bits, position - step.start);
      if (final?.array instanceof Uint16Array) final.array.set(bits, position - final.offset);
      else {
        if (copy) kernels.decode(whole, shift);
        const floats = views.outputFloats.subarray(0, whole);
        if (final !== undefined) final.array.set(floats, position - final.offset);
        else work.subarray(position, position + whole).set(floats);
      }
      position += whole;
      if (pending > whole * 2) inputBytes.copyWithin(0, whole * 2, pending);
      pending -= whole * 2;
      if ((position - forwardedUpTo) * forwardBytes >= FORWARD_BATCH_BYTES) flushEncoded();
    };
    return {
      bytes: (step.end - step.start) * 2,
      consume: (chunk) => {
        let rest = chunk;
        while (rest.length > 0) {
          const take = Math.min(rest.length, inputBytes.length - pending);
          inputBytes.set(rest.subarray(0, take), pending);
          advance(take);
          rest = rest.subarray(take);
        }
      },
      end: flushEncoded,
      target: () => inputBytes.subarray(pending),
      advance,
    };
  }
  const kernels =
    step.mode === 'reduce' && step.wire === 'same' && !(work instanceof Uint16Array) ? reduceKernels() : null;
  if (kernels !== null) {
    // [Note: simd reduce steps] Incoming bytes land in the WebAssembly SIMD kernel's input region
    // (a native receive writes them there, see `target`); per block, this rank's own values are
    // copied into the accumulator, reduced, and copied into the work array. A partial element
    // waits at the front of the region for its other bytes.
    const floats = work instanceof Float32Array;
    const own = plan.base ?? work;
    // [Note: scratch placement], as in the bfloat16 steps above.
    const shift =
      step.end - step.start < PLACEMENT_MINIMUM
        ? 0
        : placementShift(
            [REDUCE_REGIONS.accumulator, REDUCE_REGIONS.accumulator, REDUCE_REGIONS.input],
            [own.subarray(step.start), work.subarray(step.start), work.subarray(step.start)],
          );
    const views = kernels.at(shift);
    const input = floats ? views.inputFloats : views.inputInts;
    const accumulator = floats ? views.accumulatorFloats : views.accumulatorInts;
    const reduce =
      kernels.reduce[
        `${plan.reduceOp === 'max' ? 'max' : plan.reduceOp === 'min' ? 'min' : 'sum'}${floats ? 'Float' : 'Int'}`
      ];
    const inputBytes = new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
    const floatSum = floats && (plan.reduceOp === 'sum' || plan.reduceOp === 'avg');
    // [Note: blas reduce steps] in native-blas.ts: the sums are added in place in the work array.
    const blas = floatSum ? native?.add : undefined;
    if (floatSum) countReduceStep(native?.counts, blas === undefined ? 'simd' : 'blas');
    let pending = 0;
    const advance = (count: number): void => {
      pending += count;
      const whole = Math.floor(pending / elementBytes);
      if (whole === 0) return;
      const target = work.subarray(position, position + whole);
      if (blas !== undefined) {
        const incoming = views.inputFloats.subarray(0, whole);
        if (plan.base === undefined) blas.addInto(target as Float32Array, incoming);
        else
          blas.sumInto(
            target as Float32Array,
            plan.base.subarray(position, position + whole) as Float32Array,
            incoming,
          );
      } else {
        accumulator.set(own.subarray(position, position + whole) as never);
        reduce(whole, shift);
        target.set(accumulator.subarray(0, whole) as never);
      }
      step.finish?.(target);
      writeFinal(target);
      position += whole;
      const used = whole * elementBytes;
      if (pending > used) inputBytes.copyWithin(0, used, pending);
      pending -= used;
      if ((position - forwardedUpTo) * forwardBytes >= FORWARD_BATCH_BYTES) flush();
    };
    return {
      bytes: (step.end - step.start) * elementBytes,
      consume: (chunk) => {
        let rest = chunk;
        while (rest.length > 0) {
          const take = Math.min(rest.length, inputBytes.length - pending);
          inputBytes.set(rest.subarray(0, take), pending);
          advance(take);
          rest = rest.subarray(take);
        }
      },
      end: flush,
      target: () => inputBytes.subarray(pending),
      advance,
    };
  }
  const apply = (buffer: ArrayBufferLike, byteOffset: number, length: number): void => {
    const incoming = typedView(work, step.wire, buffer, byteOffset, length);
    const target = work.subarray(position, position + length);
    if (base !== undefined) {
      const own = base.subarray(position, position + length) as AccumulatorArray;
      const wireKernels = step.wire === 'bfloat16' && work instanceof Float32Array ? reduceKernels() : null;
      if (wireKernels !== null) {
        // bfloat16 partial sums decoded into the SIMD kernel's input, reduced with this rank's own.
        const reduce = wireKernels.reduce[floatKernelName(plan.reduceOp)];
        for (let done = 0; done < length; done += REDUCE_BLOCK) {
          const count = Math.min(REDUCE_BLOCK, length - done);
          decodeBfloat16(
            (incoming as Uint16Array).subarray(done, done + count),
            wireKernels.inputFloats.subarray(0, count),
          );
          wireKernels.accumulatorFloats.set((own as Float32Array).subarray(done, done + count));
          reduce(count);
          (target as Float32Array).set(wireKernels.accumulatorFloats.subarray(0, count), done);
        }
      } else {
        let other = incoming as AccumulatorArray;
        if (step.wire === 'bfloat16') {
          other = scratch.floats(length);
          decodeBfloat16(incoming as Uint16Array, other);
        }
        reducePair(target as AccumulatorArray, own, other, plan.reduceOp);
      }
    } else if (step.wire === 'bfloat16') {
      if (step.mode === 'copy') decodeBfloat16(incoming as Uint16Array, target as Float32Array);
      else if (plan.reduceOp === 'sum' || plan.reduceOp === 'avg')
        addBfloat16Into(target as Float32Array, incoming as Uint16Array);
      else {
        const floats = scratch.floats(length);
        decodeBfloat16(incoming as Uint16Array, floats);
        reduceInto(target as Float32Array, floats, plan.reduceOp);
      }
    } else if (step.mode === 'reduce')
      reduceInto(target as Float32Array | Int32Array, incoming as Float32Array | Int32Array, plan.reduceOp);
    else target.set(incoming as never);
    step.finish?.(target);
    writeFinal(target);
    position += length;
    if ((position - forwardedUpTo) * forwardBytes >= FORWARD_BATCH_BYTES) flush();
  };
  const consume = (chunk: Uint8Array): void => {
    let offset = 0;
    if (carryLength > 0) {
      const take = Math.min(elementBytes - carryLength, chunk.length);
      carry.set(chunk.subarray(0, take), carryLength);
      carryLength += take;
      offset = take;
      if (carryLength < elementBytes) return;
      apply(scratch.alignedCopy(carry.subarray(0, elementBytes)), 0, 1);
      carryLength = 0;
    }
    const whole = Math.floor((chunk.length - offset) / elementBytes);
    if (whole > 0) {
      const byteOffset = chunk.byteOffset + offset;
      const bytes = whole * elementBytes;
      if (byteOffset % elementBytes === 0) apply(chunk.buffer, byteOffset, whole);
      else apply(scratch.alignedCopy(chunk.subarray(offset, offset + bytes)), 0, whole);
      offset += bytes;
    }
    if (offset < chunk.length) {
      carry.set(chunk.subarray(offset), 0);
      carryLength = chunk.length - offset;
    }
  };
  return { bytes: (step.end - step.start) * elementBytes, consume, end: flush };
}

/** Reads one step's bytes from `previous` through a step consumer that forwards to `next`. */
async function runStep(
  plan: RingPlan,
  step: IncomingStep,
  previous: PeerLink,
  next: PeerLink | null,
  scratch: RingScratch,
): Promise<void> {
  const consumer = stepConsumer(plan, step, next === null ? null : (bytes) => next.write(bytes), scratch);
  await previous.read(consumer.bytes, consumer.consume);
  consumer.end();
}

/** The bytes a ring plan sends before anything arrives (its initial range), or null. */
export function initialBytes(plan: RingPlan, scratch: RingScratch): Uint8Array | null {
  if (plan.initial === null) return null;
  if (plan.initialEncoded !== undefined) return plan.initialEncoded;
  const { start, end, wire } = plan.initial;
  return end > start ? encodeRange(plan.base ?? plan.work, start, end, wire, scratch) : null;
}

/**
 * Runs a ring plan's incoming steps in order; its initial range was sent already (see
 * initialBytes and [Note: eager first segment] in node-net-frames.ts).
 */
export async function runRingSteps(
  plan: RingPlan,
  previous: PeerLink | null,
  next: PeerLink | null,
  scratch: RingScratch,
): Promise<void> {
  for (const step of plan.steps) {
    if (step.end > step.start && previous !== null) await runStep(plan, step, previous, next, scratch);
  }
}

function floatKernelName(reduceOp: ReduceOp): 'sumFloat' | 'maxFloat' | 'minFloat' {
  return reduceOp === 'max' ? 'maxFloat' : reduceOp === 'min' ? 'minFloat' : 'sumFloat';
}
