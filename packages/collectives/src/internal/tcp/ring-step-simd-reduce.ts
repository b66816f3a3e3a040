import {
  PLACEMENT_MINIMUM,
  placementShift,
  REDUCE_REGIONS,
  type ReduceKernels,
  scalesExactly,
} from '@fsdp-ts/kernels';
import { kernelName } from '../shm/shm-reduce.js';
import { countReduceStep, type NativeReduce } from './native-blas.js';
import type { IncomingStep, RingPlan, StepConsumer } from './ring.js';
import { regionStep, type StepProgress } from './ring-steps.js';

/**
 * [Note: simd reduce steps] Incoming bytes land in the WebAssembly SIMD kernel's input region
 * (a native receive writes them there, see `target`); per block, this rank's own values are
 * copied into the accumulator, reduced, and copied into the work array. A partial element
 * waits at the front of the region for its other bytes.
 */
export function simdReduceStep(
  plan: RingPlan,
  step: IncomingStep,
  progress: StepProgress,
  elementBytes: number,
  kernels: ReduceKernels,
  native: NativeReduce | undefined,
): StepConsumer {
  const { work } = plan;
  const floats = work instanceof Float32Array;
  const own = plan.base ?? work;
  // [Note: scratch placement], as in the bfloat16 steps (ring-steps.ts).
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
  const reduce = kernels.reduce[kernelName(floats, plan.reduceOp)];
  const inputBytes = new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  const floatSum = floats && (plan.reduceOp === 'sum' || plan.reduceOp === 'avg');
  // [Note: blas reduce steps]
  const blas = floatSum ? native?.add : undefined;
  if (floatSum) countReduceStep(native?.counts, blas === undefined ? 'simd' : 'blas');
  const scaleBy =
    blas !== undefined && step.averageOver !== undefined && scalesExactly(step.averageOver)
      ? 1 / step.averageOver
      : undefined;
  const apply = (position: number, whole: number): void => {
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
    if (scaleBy !== undefined) blas!.scale(target as Float32Array, scaleBy);
    else step.finish?.(target);
    progress.writeFinal(target);
  };
  return regionStep(step, progress, inputBytes, elementBytes, apply);
}
