import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { describe, expect, it } from 'vitest';
import { type SharedBlockArguments, sharedBlockReference } from './fixtures/shared-block-rank';
import type { TrainingResult } from './fixtures/training-run';

const fixture = new URL('./fixtures/shared-block-rank.ts', import.meta.url);

/** Reassembles every parameter (or gradient) from the ranks' pieces; every element claimed once. */
function assemble(
  results: TrainingResult[],
  reference: TrainingResult,
  field: 'pieces' | 'firstGradients',
): Record<string, Float64Array> {
  const assembled: Record<string, Float64Array> = {};
  for (const [name, { values }] of Object.entries(reference[field])) {
    const full = new Float64Array(values.length).fill(Number.NaN);
    for (const result of results) {
      const piece = result[field][name];
      expect(piece, `rank result lacks ${name}`).toBeDefined();
      piece!.values.forEach((value, index) => {
        expect(Number.isNaN(full[piece!.offset + index]!), `${name}[${index}] claimed twice`).toBe(true);
        full[piece!.offset + index] = value;
      });
    }
    assembled[name] = full;
  }
  return assembled;
}

// Stated tolerances: only the summation order differs from the reference (mean of per-rank means
// against one mean, and two gradient contributions per shared parameter added in another order).
// Gradients after the first backward: 1e-5 of the largest |gradient| of the tensor. Losses and
// parameters after 4 SGD steps (lr 0.1): 1e-5 relative, at least at the init scale (0.02).
function expectClose(actual: number, expected: number, what: string): void {
  expect(Math.abs(actual - expected), `${what}: ${actual} vs ${expected}`).toBeLessThanOrEqual(
    1e-5 * Math.max(Math.abs(expected), 0.02),
  );
}

async function checkParity(args: SharedBlockArguments): Promise<void> {
  const reference = await sharedBlockReference(args);
  const results = (await spawnThreadRanks(args.worldSize, fixture, 'sharedBlockRank', {
    args,
    timeoutMs: 60_000,
  })) as TrainingResult[];
  expect(reference.losses.at(-1)!).toBeLessThan(reference.losses[0]!);
  for (const result of results)
    result.losses.forEach((loss, step) => {
      expectClose(loss, reference.losses[step]!, `loss of step ${step}`);
    });
  const gradients = assemble(results, reference, 'firstGradients');
  for (const [name, { values }] of Object.entries(reference.firstGradients)) {
    const scale = Math.max(...values.map(Math.abs), 1e-12);
    values.forEach((value, index) => {
      const actual = gradients[name]![index]!;
      expect(Math.abs(actual - value), `grad ${name}[${index}]: ${actual} vs ${value}`).toBeLessThanOrEqual(
        1e-5 * scale,
      );
    });
  }
  const pieces = assemble(results, reference, 'pieces');
  for (const [name, { values }] of Object.entries(reference.pieces)) {
    values.forEach((value, index) => {
      expectClose(pieces[name]![index]!, value, `${name}[${index}]`);
    });
  }
}

describe('a unit whose forward runs twice in one step (a shared block), W=2', () => {
  for (const [strategy, layout, activationCheckpointing] of [
    ['full-shard', 'consecutive', false],
    ['full-shard', 'interleaved', false],
    ['full-shard', 'interleaved', true],
    ['full-shard', 'consecutive', true],
    ['shard-grad-op', 'interleaved', false],
  ] as const) {
    const recompute = activationCheckpointing ? ', recomputed' : '';
    it(`${strategy}, ${layout} uses${recompute}: losses, first gradients and parameters equal the unwrapped run`, async () => {
      await checkParity({ strategy, layout, activationCheckpointing, steps: 4, worldSize: 2 });
    });
  }
});
