import {
  BFLOAT16_REGIONS,
  type Bfloat16Kernels,
  PLACEMENT_MINIMUM,
  placementShift,
  SIMD_BLOCK,
} from '@fsdp-ts/kernels';
import type { IncomingStep, RingPlan, RingScratch, StepConsumer } from './ring.js';
import { feedRegion, type StepProgress } from './ring-step-progress.js';

/**
 * [Note: bfloat16 steps in the kernel's memory] bfloat16 bytes land in the bfloat16
 * kernel's input region (a native receive writes them there), and one kernel pass per block
 * turns them into the work array's floats: a copy step decodes them; a sum's last reduce
 * step adds them to this rank's own values and rounds the sums to bfloat16, writing both
 * the rounded floats and their bfloat16 bits. What is forwarded in bfloat16 is copied from
 * the kernel's memory to outgoing staging (the received bits, or the sums' bits) and sent
 * from there, never encoded again from the work array.
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
    if (encoded === null) progress.flush();
    else progress.flushEncoded(encoded);
  };
  let pending = 0;
  const advance = (count: number): void => {
    pending += count;
    const whole = Math.floor(pending / 2);
    if (whole === 0) return;
    const position = progress.position;
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
    progress.advance(whole);
    if (pending > whole * 2) inputBytes.copyWithin(0, whole * 2, pending);
    pending -= whole * 2;
    if (progress.batchDue()) flushEncoded();
  };
  return {
    bytes: (step.end - step.start) * 2,
    consume: (chunk) => feedRegion(chunk, inputBytes, () => pending, advance),
    end: flushEncoded,
    target: () => inputBytes.subarray(pending),
    advance,
  };
}
