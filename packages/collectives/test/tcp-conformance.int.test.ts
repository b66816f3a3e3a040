import { describe, expect, it } from 'vitest';
import type { CaseOutcome } from './conformance/run-conformance.js';
import { spawnProcessRanks } from './helpers/spawn-process-ranks.js';

const script = new URL('./fixtures/tcp-rank.ts', import.meta.url);

describe('tcp backend conformance (real processes)', () => {
  for (const size of [1, 2, 3, 4]) {
    it(`every op x dtype x size matches the reference on ${size} process(es)`, async () => {
      const runs = await spawnProcessRanks(size, script, ['conformance'], { timeoutMs: 100_000 });
      for (const run of runs) expect(run.code, `rank ${run.rank} output:\n${run.output}`).toBe(0);
      const outcomes = runs.flatMap((run) => run.result as CaseOutcome[]);
      expect(outcomes.filter((outcome) => outcome.failure !== undefined)).toEqual([]);
      expect((runs[0]!.result as CaseOutcome[]).length).toBeGreaterThan(50);
    }, 120_000);
  }
});
