import { describe, expect, it } from 'vitest';
import { spawnThreadRanks } from '../src/index.js';
import type { PathOutcome } from './fixtures/shm-arena-path-rank.js';

const fixture = new URL('./fixtures/shm-arena-path-rank.ts', import.meta.url);

/**
 * Both paths give the same results, so conformance cannot tell them apart: the arena's reduction
 * counts ([Note: arena reduction counts]) show which one each op took.
 */
describe('shm engine: ops over arena buffers reduce in place ([Note: shm arena])', () => {
  for (const size of [2, 3]) {
    it(`${size} thread ranks: all-arena float32 and bfloat16 sums run in place (reduce-scatter in place too, on every rank), mixed ones through the copy path, with equal results`, async () => {
      const outcomes = (await spawnThreadRanks(size, fixture, 'arenaPathRank', {
        timeoutMs: 60_000,
      })) as PathOutcome[][];
      expect(outcomes).toHaveLength(size);
      const names = outcomes[0]!.map((outcome) => `${outcome.name} ${outcome.placement}`);
      expect(names).toEqual([
        'float32 allReduce arena',
        'float32 allReduce mixed',
        'float32 reduceScatter arena',
        'float32 reduceScatter mixed',
        'float32 reduceScatter in place arena',
        'float32 reduceScatter in place mixed',
        'bfloat16 allReduce arena',
        'bfloat16 allReduce mixed',
        'bfloat16 reduceScatter arena',
        'bfloat16 reduceScatter mixed',
        'bfloat16 reduceScatter in place arena',
        'bfloat16 reduceScatter in place mixed',
      ]);
      for (const [rank, rankOutcomes] of outcomes.entries())
        for (const outcome of rankOutcomes) {
          const label = `rank ${rank}: ${outcome.name} over ${outcome.placement} buffers`;
          // One reduction per rank per op, on the path its buffers call for.
          const path =
            outcome.placement === 'arena' ? { inPlace: size, copied: 0 } : { inPlace: 0, copied: size };
          expect({ inPlace: outcome.inPlace, copied: outcome.copied }, label).toEqual(path);
          // The exact sum (small integers: no rounding), on both paths.
          expect(outcome.mismatch, label).toBe(-1);
        }
      // Bit for bit the same result in the arena and mixed with a plain buffer.
      for (const rankOutcomes of outcomes)
        for (let index = 0; index < rankOutcomes.length; index += 2)
          expect(rankOutcomes[index]!.checksum, rankOutcomes[index]!.name).toBe(
            rankOutcomes[index + 1]!.checksum,
          );
    }, 90_000);
  }
});
