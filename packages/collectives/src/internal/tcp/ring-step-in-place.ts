import type { IncomingStep, RingPlan, StepConsumer } from './ring.js';
import type { StepProgress } from './ring-step-progress.js';

/**
 * A copy step whose bytes travel as the work array holds them, with nothing to finish: they land
 * in place, whole elements or not (no carry, no aligned copies), and a native receive writes
 * them there directly.
 */
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
