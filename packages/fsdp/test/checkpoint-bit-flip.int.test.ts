import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { afterAll, describe, expect, it } from 'vitest';
import type { FlipOutcome } from './fixtures/bit-flip-rank';

const fixture = new URL('./fixtures/bit-flip-rank.ts', import.meta.url);
const work = mkdtempSync(join(tmpdir(), 'fsdp-bit-flip-'));

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

describe('loadCheckpoint of a checkpoint that differs in one bit', () => {
  it('fails on every rank for a flipped bit in any file (and an edited byteOffset), naming the file', async () => {
    const reports = (await spawnThreadRanks(2, fixture, 'bitFlipRank', {
      args: { work, perFile: 6 },
      timeoutMs: 120_000,
    })) as { outcomes: FlipOutcome[]; unchanged: boolean; cases: number }[];
    // metadata.json, latest is outside the step directory; 2 data files and 2 index files.
    expect(reports[0]!.cases).toBe(5 * 6 + 1);
    for (const report of reports) expect(report.unchanged).toBe(true);
    for (let index = 0; index < reports[0]!.cases; index++) {
      const outcomes = reports.map((report) => report.outcomes[index]!);
      const { label, file } = outcomes[0]!;
      for (const outcome of outcomes) expect(outcome.error, `${label}: loaded without error`).not.toBeNull();
      const own = outcomes.filter((outcome) => outcome.error!.reason !== 'peer-failed');
      expect(own.length, `${label}: ${JSON.stringify(outcomes)}`).toBeGreaterThan(0);
      // Every rank's error names the file and the rank that found the damage, and says which rank it is.
      outcomes.forEach((outcome, rank) => {
        expect(outcome.error!.message, label).toContain(file);
        expect(outcome.error!.file, label).toMatch(new RegExp(`${file.replace('.', '\\.')}$`));
        expect(outcome.error!.rank, label).toBe(rank);
        if (outcome.error!.reason === 'peer-failed')
          expect(outcome.error!.message).toMatch(/failed on rank [01]/);
        else expect(outcome.error!.message).toMatch(new RegExp(`^Rank ${rank}: `));
      });
    }
  }, 150_000);
});
