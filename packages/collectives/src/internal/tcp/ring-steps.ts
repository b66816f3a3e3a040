import {
  type AccumulatorArray,
  addBfloat16Into,
  BFLOAT16_REGIONS,
  type Bfloat16Kernels,
  bfloat16Kernels,
  decodeBfloat16,
  encodeBfloat16,
  PLACEMENT_MINIMUM,
  placementShift,
  REDUCE_BLOCK,
  reduceInto,
  reduceKernels,
  reducePair,
  SIMD_BLOCK,
} from '@fsdp-ts/kernels';
import { kernelName } from '../shm/shm-reduce.js';
import type { NativeReduce } from './native-blas.js';
import type { PeerLink } from './peer-link.js';
import {
  encodeRange,
  type IncomingStep,
  type RingPlan,
  type RingScratch,
  type StepConsumer,
  type Wire,
  type WorkArray,
} from './ring.js';
import { simdReduceStep } from './ring-step-simd-reduce.js';

/**
 * Applies one step's bytes as they arrive and forwards the processed ranges ([Note: forward
 * batching]), through the first kind that fits: in-place copy, bfloat16 kernel step, SIMD/BLAS
 * reduce step, general step.
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
  const progress = new StepProgress(plan, step, forward, scratch);
  if (step.mode === 'copy' && step.wire === 'same' && step.finish === undefined)
    return inPlaceCopyStep(plan, step, progress);
  const bfloat16 =
    step.wire === 'bfloat16' &&
    work instanceof Float32Array &&
    ((step.mode === 'copy' && step.finish === undefined) ||
      (step.finishRoundsOnly === true && plan.reduceOp === 'sum'))
      ? bfloat16Kernels()
      : null;
  if (bfloat16 !== null) return bfloat16KernelStep(plan, step, progress, scratch, bfloat16);
  const kernels =
    step.mode === 'reduce' && step.wire === 'same' && !(work instanceof Uint16Array) ? reduceKernels() : null;
  if (kernels !== null) return simdReduceStep(plan, step, progress, elementBytes, kernels, native);
  return generalStep(plan, step, progress, elementBytes, scratch);
}

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

/** A ring plan's incoming steps over node:net; the initial range went with the header ([Note: eager first segment]). */
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

/** Steps the faster kinds do not take, applied from the scratch's receive region. */
export function generalStep(
  plan: RingPlan,
  step: IncomingStep,
  progress: StepProgress,
  elementBytes: number,
  scratch: RingScratch,
): StepConsumer {
  const { work } = plan;
  const base = step.mode === 'reduce' ? plan.base : undefined;
  const region = scratch.receiveRegion();
  const apply = (position: number, length: number): void => {
    const incoming = typedView(work, step.wire, region.buffer, region.byteOffset, length);
    const target = work.subarray(position, position + length);
    if (base !== undefined) {
      const own = base.subarray(position, position + length) as AccumulatorArray;
      const wireKernels = step.wire === 'bfloat16' && work instanceof Float32Array ? reduceKernels() : null;
      if (wireKernels !== null) {
        // bfloat16 partial sums decoded into the SIMD kernel's input, reduced with this rank's own.
        const reduce = wireKernels.reduce[kernelName(true, plan.reduceOp)];
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
    progress.writeFinal(target);
  };
  return regionStep(step, progress, region, elementBytes, apply);
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

/**
 * [Note: bfloat16 steps in the kernel's memory] bfloat16 bytes land in the bfloat16 kernel's
 * input region, and one pass per block turns them into the work array's floats (a copy decodes;
 * a sum's last step adds and rounds, writing floats and bits). What is forwarded is copied from
 * the kernel's memory, never encoded again from the work array.
 */
export function bfloat16KernelStep(
  plan: RingPlan,
  step: IncomingStep,
  progress: StepProgress,
  scratch: RingScratch,
  kernels: Bfloat16Kernels,
): StepConsumer {
  const { work } = plan;
  const { final, forwardWire } = progress;
  const own = (plan.base ?? work) as Float32Array;
  const copy = step.mode === 'copy';
  const encoded = forwardWire === 'bfloat16' ? scratch.takeStaging(step.end - step.start) : null;
  // [Note: scratch placement]
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
  // [Note: fast bfloat16 steps forward bfloat16] With `final` this path leaves the work array
  // unwritten, so it may forward only bfloat16 (from `encoded`) or nothing.
  if (final !== undefined && forwardWire !== null && forwardWire !== 'bfloat16') {
    throw new Error(
      `ring step [${step.start}, ${step.end}): a bfloat16 step with results in place forwards ${forwardWire}, breaking [Note: fast bfloat16 steps forward bfloat16]`,
    );
  }
  const flushEncoded = (): void => {
    if (encoded === null) progress.flush();
    else progress.flushEncoded(encoded);
  };
  const apply = (position: number, whole: number): void => {
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
  };
  return regionStep(step, progress, inputBytes, 2, apply, flushEncoded);
}

/** A copy step whose bytes travel as stored: they land in place (a native receive writes them there). */
export function inPlaceCopyStep(plan: RingPlan, step: IncomingStep, progress: StepProgress): StepConsumer {
  const { work } = plan;
  const size = work.BYTES_PER_ELEMENT;
  const bytes = new Uint8Array(
    work.buffer,
    work.byteOffset + step.start * size,
    (step.end - step.start) * size,
  );
  let filled = 0;
  const advance = (count: number): void => {
    filled += count;
    progress.filledInPlace(filled);
    if (progress.batchDue()) progress.flush();
  };
  return {
    bytes: bytes.length,
    consume: (chunk) => {
      bytes.set(chunk, filled);
      advance(chunk.length);
    },
    end: () => progress.flush(),
    target: () => bytes.subarray(filled),
    advance,
  };
}

/** Forwarded bytes per write (see [Note: forward batching]). */
const FORWARD_BATCH_BYTES = 256 * 1024;

export function wireBytes(work: WorkArray, wire: Wire): number {
  return wire === 'bfloat16' ? 2 : work.BYTES_PER_ELEMENT;
}

/**
 * A step whose bytes land in `region` (a kernel's input, or the scratch's receive region; a
 * native receive writes there, see `target`) and `apply` takes whole elements from its front at
 * the step's position; a partial element waits there for its other bytes.
 */
export function regionStep(
  step: IncomingStep,
  progress: StepProgress,
  region: Uint8Array,
  elementBytes: number,
  apply: (position: number, elements: number) => void,
  end: () => void = () => progress.flush(),
): StepConsumer {
  let pending = 0;
  const advance = (count: number): void => {
    pending += count;
    const whole = Math.floor(pending / elementBytes);
    if (whole === 0) return;
    apply(progress.position, whole);
    progress.advance(whole);
    const used = whole * elementBytes;
    if (pending > used) region.copyWithin(0, used, pending);
    pending -= used;
    if (progress.batchDue()) end();
  };
  const consume = (chunk: Uint8Array): void => {
    for (let rest = chunk; rest.length > 0; ) {
      const take = Math.min(rest.length, region.length - pending);
      region.set(rest.subarray(0, take), pending);
      advance(take);
      rest = rest.subarray(take);
    }
  };
  return {
    bytes: (step.end - step.start) * elementBytes,
    consume,
    end,
    target: () => region.subarray(pending),
    advance,
  };
}

/**
 * How far one incoming step got: processed, forwarded, final values written ([Note: results in place]).
 *
 * [Note: forward batching] Processed ranges are contiguous in the work array, so they are
 * forwarded as one write per FORWARD_BATCH_BYTES instead of one per socket read: each write is a
 * send() through the loopback TCP stack, and fewer, larger ones cost less CPU per byte.
 */
export class StepProgress {
  /** Elements, not bytes. */
  #position: number;
  #forwardedUpTo: number;
  readonly forwardWire: Wire | null;
  /** 0 when nothing is forwarded. */
  readonly #forwardBytes: number;
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

  advance(count: number): void {
    this.#position += count;
  }

  filledInPlace(filled: number): void {
    this.#position = this.step.start + Math.floor(filled / this.plan.work.BYTES_PER_ELEMENT);
  }

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

  flush(): void {
    if (this.forwardWire === null || this.#position === this.#forwardedUpTo) return;
    this.forward!(
      encodeRange(this.plan.work, this.#forwardedUpTo, this.#position, this.forwardWire, this.scratch),
    );
    this.#forwardedUpTo = this.#position;
  }

  /** As flush, from `encoded`, the step's bfloat16 bits. */
  flushEncoded(encoded: Uint16Array): void {
    if (this.#position === this.#forwardedUpTo) return;
    const from = this.#forwardedUpTo - this.step.start;
    const length = this.#position - this.#forwardedUpTo;
    this.forward!(new Uint8Array(encoded.buffer, encoded.byteOffset + from * 2, length * 2));
    this.#forwardedUpTo = this.#position;
  }
}
