import { describe, expect, it } from 'vitest';
import { spawnThreadRanks } from '../src/index.js';
import type { CaseOutcome } from './conformance/run-conformance.js';

const fixture = new URL('./fixtures/shm-rank.ts', import.meta.url);

describe('shm backend conformance', () => {
  for (const size of [1, 2, 3, 4]) {
    it(`every op x dtype x size matches the reference on ${size} thread rank(s)`, async () => {
      const results = (await spawnThreadRanks(size, fixture, 'conformanceRank', {
        args: { huge: size === 2 || size === 3 },
        timeoutMs: 170_000,
      })) as CaseOutcome[][];
      expect(results).toHaveLength(size);
      const failures = results.flat().filter((outcome) => outcome.failure !== undefined);
      expect(failures).toEqual([]);
      expect(results[0]!.length).toBeGreaterThan(40);
    }, 180_000);
  }
});
