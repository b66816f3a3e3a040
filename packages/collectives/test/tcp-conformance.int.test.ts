import { describe, expect, it } from 'vitest';
import type { CaseOutcome } from './conformance/run-conformance.js';
import { runWithLauncher } from './helpers/run-with-launcher.js';

const script = new URL('./fixtures/tcp-rank.ts', import.meta.url);

describe('tcp backend conformance (real processes under fsdp-run)', () => {
  for (const size of [1, 2, 3, 4]) {
    it(`every op x dtype x size matches the reference on ${size} process(es)`, async () => {
      const run = await runWithLauncher(size, script, ['conformance'], { timeoutMs: 170_000 });
      expect(run.code, run.output).toBe(0);
      expect(run.results.size, run.output).toBe(size);
      const outcomes = [...run.results.values()].flatMap((result) => result as CaseOutcome[]);
      expect(outcomes.filter((outcome) => outcome.failure !== undefined)).toEqual([]);
      expect((run.results.get(0) as CaseOutcome[]).length).toBeGreaterThan(50);
    }, 180_000);
  }
});
