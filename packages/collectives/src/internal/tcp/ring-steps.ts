import { bfloat16Kernels, reduceKernels } from '@fsdp-ts/kernels';
import type { NativeReduce } from './native-blas.js';
import type { PeerLink } from './peer-link.js';
import type { IncomingStep, RingPlan, RingScratch, StepConsumer } from './ring.js';
import { bfloat16KernelStep } from './ring-step-bfloat16.js';
import { generalStep } from './ring-step-general.js';
import { inPlaceCopyStep } from './ring-step-in-place.js';
import { StepProgress, wireBytes } from './ring-step-progress.js';
import { simdReduceStep } from './ring-step-simd-reduce.js';

/**
 * Applies one step's bytes to the work array as they arrive (reduce or copy) and forwards the
 * processed ranges through `forward`: sending, receiving and reducing overlap at the granularity
 * of the socket's reads ([Note: forward batching]). The first kind that fits takes the step:
 * 1. a copy step in the work array's own elements with nothing to finish lands in place
 *    (ring-step-in-place.ts);
 * 2. a float32 step with bfloat16 on the wire, copied or a sum's last reduce step that only
 *    rounds, runs through the bfloat16 kernel ([Note: bfloat16 steps in the kernel's memory]);
 * 3. a reduce step in the work array's own float32 or int32 elements runs through the SIMD
 *    reduction kernel, or OpenBLAS for float32 sums ([Note: simd reduce steps]);
 * 4. anything else, and any step whose kernel did not load, through the general path
 *    (ring-step-general.ts).
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

/**
 * Runs a ring plan's incoming steps in order; its initial range was sent already (see
 * initialBytes in ring.ts and [Note: eager first segment] in node-net-frames.ts).
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
