import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { describe, expect, it } from 'vitest';
import { fsdpRunArguments } from '../../collectives/test/helpers/rank-commands';
import type { IdenticalFailureReport, StepOutcome } from './fixtures/identical-failure-rank';
import type { HybridFailureCase, StepFailureCase } from './fixtures/step-failure-rank';
import { watchLaunch } from './support/watched-launch';

const fixture = new URL('./fixtures/step-failure-rank.ts', import.meta.url);
const identicalScript = fileURLToPath(new URL('./fixtures/identical-failure-rank.ts', import.meta.url));

/** Runs identical-failure-rank.ts on `size` real processes through fsdp-run (tcp on loopback). */
async function launchIdenticalFailures(
  size: number,
  env: Record<string, string>,
): Promise<IdenticalFailureReport[]> {
  const output = mkdtempSync(join(tmpdir(), 'fsdp-identical-'));
  const child = spawn(
    process.execPath,
    [...fsdpRunArguments(), '--nproc-per-node', String(size), identicalScript, output],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FSDP_BLAS: 'off', ...env } },
  );
  const launch = watchLaunch(child, 150_000, { name: 'fsdp-run', match: 'output' });
  const code = await launch.exited;
  expect(code, launch.output()).toBe(0);
  return Array.from(
    { length: size },
    (_, rank) =>
      JSON.parse(readFileSync(join(output, `rank-${rank}.json`), 'utf8')) as IdenticalFailureReport,
  );
}

function failure(outcome: StepOutcome | undefined): Exclude<StepOutcome, { loss: number }> {
  expect(outcome).toBeDefined();
  expect('loss' in outcome!, JSON.stringify(outcome)).toBe(false);
  return outcome as Exclude<StepOutcome, { loss: number }>;
}

function losses(steps: readonly StepOutcome[]): number[] {
  return steps.flatMap((outcome) => ('loss' in outcome ? [outcome.loss] : []));
}

// Issue 31 point 8 ([Note: step failure], [Note: failure agreement]): the same failure on every
// rank at the same point throws on every rank and the group stays usable; the run then equals one
// with the bad steps skipped. A failure the ranks cannot agree on still breaks the group on every
// rank, promptly (the ranks' op timeout is 30 s).
describe('the same failure on every rank (real processes under fsdp-run, tcp)', () => {
  for (const [size, env, path] of [
    [2, {}, 'native data path when it loads'],
    [3, {}, 'native data path when it loads'],
    [2, { FSDP_TCP_NATIVE: '0' }, 'node:net'],
  ] as const) {
    it(`W=${size}, ${path}: a bad batch, bad targets and a throwing gradient everywhere throw 'step-failed' (group usable) and training goes on bitwise as if they were skipped; one-sided or different-point failures break the group on every rank at once`, async () => {
      const reports = await launchIdenticalFailures(size, env);
      const last = size - 1;
      for (const [rank, report] of reports.entries()) {
        for (const index of [2, 4, 6]) {
          const failed = failure(report.identical.steps[index]);
          const label = `rank ${rank}, step ${index}: ${failed.message}`;
          expect(failed.code, label).toBe('step-failed');
          expect(failed.groupBroken, label).toBe(false);
          expect(failed.rank, label).toBe(rank);
          expect(failed.message, label).toMatch(/failed on every rank alike/);
          expect(failed.message, label).toMatch(
            index === 2 ? /\[2, 9\]/ : index === 4 ? /targets \[2, 5\]/ : /gradient boom/,
          );
          expect(failed.fix, label).toMatch(/need not restart/);
          expect(failed.fix, label).not.toMatch(/max-restarts/);
        }
        expect(report.identical.steps.filter((outcome) => 'loss' in outcome)).toHaveLength(5);
        expect(losses(report.identical.steps), `rank ${rank}`).toEqual(losses(report.skipped.steps));
        expect(report.identical.shards, `rank ${rank}`).toEqual(report.skipped.shards);

        const oneSided = failure(report.oneSided.steps[1]);
        const label = `rank ${rank}, one-sided: ${oneSided.message}`;
        expect(oneSided.code, label).toBe('step-failed');
        expect(oneSided.groupBroken, label).toBe(true);
        expect(oneSided.rank, label).toBe(last);
        expect(oneSided.message, label).toMatch(new RegExp(`rank ${last} (threw|failed)`));
        expect(oneSided.message, label).toMatch(/\[2, 9\]/);
        expect(oneSided.fix, label).toMatch(/a restart does not fix a bug/);
        expect(oneSided.ms, label).toBeLessThan(10_000);
        const after = failure(report.oneSided.steps[2]);
        expect(after.code).toBe('step-failed');
        expect(after.groupBroken).toBe(true);

        const different = failure(report.differentPoints.steps[1]);
        const differentLabel = `rank ${rank}, different points: ${different.message}`;
        expect(different.code, differentLabel).toBe('step-failed');
        expect(different.groupBroken, differentLabel).toBe(true);
        expect(different.message, differentLabel).toMatch(/boom/);
        expect(different.ms, differentLabel).toBeLessThan(10_000);

        // Some ranks failing alike do not recover while another did not fail.
        const most = failure(report.allButFirst.steps[1]);
        const mostLabel = `rank ${rank}, all but rank 0: ${most.message}`;
        expect(most.code, mostLabel).toBe('step-failed');
        expect(most.groupBroken, mostLabel).toBe(true);
        expect(most.message, mostLabel).toMatch(/\[2, 9\]/);
        expect(most.ms, mostLabel).toBeLessThan(10_000);
      }
      // An identical failure reads the same on every rank (a job report can show it once).
      for (const index of [2, 4, 6]) {
        const messages = reports.map((report) => failure(report.identical.steps[index]).message);
        expect(new Set(messages).size, messages.join('\n')).toBe(1);
      }
    }, 160_000);
  }
});

// Issue 19 point 1: an exception on one rank only (first, middle, last) must leave every rank in
// the same state: the step failed everywhere naming that rank and its error, nothing stepped,
// the group broken on every rank with that error (no desynchronised later steps), a new group trains.
// Issue 31 point 8, on thread ranks (shm): the same exception on every rank keeps the group usable.
describe('one rank, or every rank alike, throws in forward (equal-size units)', () => {
  for (const size of [2, 3]) {
    it(`W=${size}: every rank fails the step naming the rank that threw, nothing steps, the group is broken everywhere`, async () => {
      const results = (await spawnThreadRanks(size, fixture, 'oneRankThrows', {
        timeoutMs: 150_000,
      })) as StepFailureCase[][];
      const throwers = [...new Set([0, Math.floor(size / 2), size - 1])];
      for (const [rank, cases] of results.entries()) {
        expect(cases.map((entry) => entry.thrower)).toEqual([...throwers, -1]);
        // The same bad batch on every rank: the step fails everywhere, the group stays usable.
        const everyRank = cases.at(-1)!;
        const everyLabel = `rank ${rank}, every rank threw: ${everyRank.failed.message}`;
        expect(everyRank.failed.code, everyLabel).toBe('step-failed');
        expect(everyRank.failed.groupBroken, everyLabel).toBe(false);
        expect(everyRank.failed.rank, everyLabel).toBe(rank);
        expect(everyRank.unchanged, everyLabel).toBe(true);
        expect(everyRank.unitStates.every((state) => state === 'sharded')).toBe(true);
        expect(everyRank.next, everyLabel).toBe('trained');
        for (const entry of cases.slice(0, -1)) {
          const label = `rank ${rank}, thrower ${entry.thrower}: ${entry.failed.message}`;
          expect(entry.failed.code, label).toBe('step-failed');
          expect(entry.failed.groupBroken, label).toBe(true);
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

describe('hybrid-shard: the shard and the replicate group agree, or both break', () => {
  it('W=4 (2 x 2, thread ranks): the same bad batch everywhere keeps both groups usable; one rank alone breaks them on every rank', async () => {
    const results = (await spawnThreadRanks(4, fixture, 'hybridThrows', {
      timeoutMs: 150_000,
    })) as HybridFailureCase[][];
    for (const [rank, [alike, alone]] of results.entries()) {
      expect(alike!.failed.code, alike!.failed.message).toBe('step-failed');
      expect(alike!.failed.groupBroken, alike!.failed.message).toBe(false);
      expect(alike!.next, `rank ${rank}`).toBe('trained');
      expect(alone!.failed.code, alone!.failed.message).toBe('step-failed');
      expect(alone!.failed.groupBroken, alone!.failed.message).toBe(true);
      // The original error reaches every rank (the rank it names is a rank of the group it came through).
      expect(alone!.failed.message).toMatch(/\[2, 9\]/);
      expect(alone!.next, `rank ${rank}`).not.toBe('trained');
    }
  }, 160_000);
});
