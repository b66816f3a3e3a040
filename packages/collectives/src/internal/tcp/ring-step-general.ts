import {
  type AccumulatorArray,
  addBfloat16Into,
  decodeBfloat16,
  REDUCE_BLOCK,
  reduceInto,
  reduceKernels,
  reducePair,
} from '@fsdp-ts/kernels';
import type { ReduceOp } from '../../types.js';
import type { IncomingStep, RingPlan, RingScratch, StepConsumer, Wire, WorkArray } from './ring.js';
import type { StepProgress } from './ring-step-progress.js';

/**
 * Every step the faster kinds do not take (see stepConsumer in ring-steps.ts): copy steps that
 * finish their values, bfloat16-wire steps the bfloat16 kernel does not take, reduce steps on raw
 * bfloat16 work arrays, and any step whose WebAssembly kernels did not load. Whole elements are
 * applied from a typed view of the chunk (an aligned copy when the chunk's offset is not a
 * multiple of the element size); a partial element is carried to the next chunk.
 */
export function generalStep(
  plan: RingPlan,
  step: IncomingStep,
  progress: StepProgress,
  elementBytes: number,
  scratch: RingScratch,
): StepConsumer {
  const { work } = plan;
  const base = step.mode === 'reduce' ? plan.base : undefined;
  const carry = new Uint8Array(4);
  let carryLength = 0;
  const apply = (buffer: ArrayBufferLike, byteOffset: number, length: number): void => {
    const position = progress.position;
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
    progress.writeFinal(target);
    progress.advance(length);
    if (progress.batchDue()) progress.flush();
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
  return { bytes: (step.end - step.start) * elementBytes, consume, end: () => progress.flush() };
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

function floatKernelName(reduceOp: ReduceOp): 'sumFloat' | 'maxFloat' | 'minFloat' {
  return reduceOp === 'max' ? 'maxFloat' : reduceOp === 'min' ? 'minFloat' : 'sumFloat';
}
