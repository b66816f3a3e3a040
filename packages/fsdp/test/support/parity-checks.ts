/**
 * The stated tolerance of the multi-host parity tests (as in parity.int.test.ts): losses and
 * parameters after 5 AdamW steps within 1e-5 relative of the single-process reference, compared
 * at the init scale (0.02) below it.
 */
import { expect } from 'vitest';
import type { TrainingResult } from '../fixtures/training-run';

export function expectClose(actual: number, expected: number, what: string): void {
  expect(Math.abs(actual - expected), `${what}: ${actual} vs ${expected}`).toBeLessThanOrEqual(
    1e-5 * Math.max(Math.abs(expected), 0.02),
  );
}

/** Checks that the given ranks' pieces cover every reference parameter element once, with its value. */
export function expectParameters(
  pieces: TrainingResult['pieces'][],
  reference: TrainingResult,
  what: string,
): void {
  for (const [name, { values }] of Object.entries(reference.pieces)) {
    const full = new Float64Array(values.length).fill(Number.NaN);
    for (const rankPieces of pieces) {
      const piece = rankPieces[name];
      expect(piece, `${what}: a rank lacks ${name}`).toBeDefined();
      piece!.values.forEach((value, index) => {
        full[piece!.offset + index] = value;
      });
    }
    for (const [index, value] of values.entries())
      expectClose(full[index]!, value, `${what} ${name}[${index}]`);
  }
}
