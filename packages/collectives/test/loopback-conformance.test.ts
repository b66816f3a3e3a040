import { describe, expect, it } from 'vitest';
import { spawnThreadRanks } from '../src/index.js';
import type { CaseOutcome } from './conformance/run-conformance.js';

const fixture = new URL('./fixtures/loopback-rank.ts', import.meta.url);

// The test-only backend of test/support/loopback-backend, built by following CONTRIBUTING.md's
// "Add a collectives backend" recipe: registered from outside the package, engine on EngineBase.
describe('loopback backend (test-only, registered from outside) conformance', () => {
  for (const size of [1, 2, 3, 4]) {
    it(`every op x dtype x size matches the reference on ${size} thread rank(s)`, async () => {
      const results = (await spawnThreadRanks(size, fixture, 'conformanceRank', {
        timeoutMs: 170_000,
      })) as CaseOutcome[][];
      expect(results).toHaveLength(size);
      const failures = results.flat().filter((outcome) => outcome.failure !== undefined);
      expect(failures).toEqual([]);
      expect(results[0]!.length).toBeGreaterThan(60);
    }, 180_000);
  }
});
