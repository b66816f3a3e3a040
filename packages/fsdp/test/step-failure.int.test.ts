import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { describe, expect, it } from 'vitest';
import type { StepFailureCase } from './fixtures/step-failure-rank';

const fixture = new URL('./fixtures/step-failure-rank.ts', import.meta.url);

// Issue 19 point 1: an exception on one rank only (first, middle, last) must leave every rank in
// the same state: the step failed everywhere naming that rank and its error, nothing stepped,
// the group broken on every rank with that error (no desynchronised later steps), a new group trains.
describe('one rank throws in forward (equal-size units)', () => {
  for (const size of [2, 3]) {
    it(`W=${size}: every rank fails the step naming the rank that threw, nothing steps, the group is broken everywhere`, async () => {
      const results = (await spawnThreadRanks(size, fixture, 'oneRankThrows', {
        timeoutMs: 150_000,
      })) as StepFailureCase[][];
      const throwers = [...new Set([0, Math.floor(size / 2), size - 1])];
      for (const [rank, cases] of results.entries()) {
        expect(cases.map((entry) => entry.thrower)).toEqual(throwers);
        for (const entry of cases) {
          const label = `rank ${rank}, thrower ${entry.thrower}: ${entry.failed.message}`;
          expect(entry.failed.code, label).toBe('step-failed');
          expect(entry.failed.rank, label).toBe(entry.thrower);
          expect(entry.failed.message, label).toMatch(new RegExp(`rank ${entry.thrower} (threw|failed)`));
          // The thrower's own error (the sequence length 9 that did not fit) reaches every rank.
          expect(entry.failed.message, label).toMatch(/9/);
          expect(entry.unchanged, label).toBe(true);
          expect(
            entry.unitStates.every((state) => state === 'sharded'),
            label,
          ).toBe(true);
          expect(entry.next, label).not.toBe('trained');
          if (entry.next !== 'trained') {
            expect(entry.next.code, label).toBe('step-failed');
            expect(entry.next.message, label).toMatch(new RegExp(`rank ${entry.thrower}`));
          }
          expect(Number.isFinite(entry.freshLoss), label).toBe(true);
        }
      }
    }, 160_000);
  }
});
