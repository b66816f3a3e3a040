/**
 * A save that fills the disk fails on every rank and leaves nothing behind, so the next save fits.
 * Needs root (it mounts a 2 MiB tmpfs, as CI's Debian container runs the tests); without the
 * privilege it fails with the mount error, it does not skip.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DiskFullReport } from './fixtures/disk-full-rank';

const fixture = new URL('./fixtures/disk-full-rank.ts', import.meta.url);
const mountPoint = mkdtempSync(join(tmpdir(), 'fsdp-disk-full-'));

beforeAll(() => {
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mountPoint]);
});

afterAll(() => {
  execFileSync('umount', [mountPoint]);
  rmSync(mountPoint, { recursive: true, force: true });
});

describe('saveCheckpoint on a full disk', () => {
  it('fails on every rank naming the file, removes its temporary directory, and the next save fits', async () => {
    const root = join(mountPoint, 'checkpoints');
    const reports = (await spawnThreadRanks(2, fixture, 'diskFullRank', {
      args: { root },
      timeoutMs: 120_000,
    })) as DiskFullReport[];
    for (const report of reports) {
      expect(report.failure?.name, JSON.stringify(report.failure)).toBe('CheckpointError');
      expect(['io', 'peer-failed']).toContain(report.failure!.reason);
    }
    const writers = reports.map((report) => report.failure!).filter((failure) => failure.reason === 'io');
    expect(writers.length).toBeGreaterThan(0);
    for (const failure of writers) {
      expect(failure.message).toMatch(/ENOSPC/);
      expect(failure.message).toMatch(/shard-0000[01]-of-00002\.(bin|json)/);
      expect(failure.file).toMatch(/shard-0000[01]-of-00002\.(bin|json)$/);
    }
    expect(reports[0]!.latestAfterFailure).toBe('step-00000001');
    expect(reports[0]!.leftoversAfterFailure).toEqual([]);
    expect(reports[0]!.secondSmallSave).toBe(join(root, 'step-00000003'));
    expect(readFileSync(join(root, 'latest'), 'utf8').trim()).toBe('step-00000003');
    expect(readdirSync(root).filter((name) => name.startsWith('.tmp-'))).toEqual([]);
  }, 150_000);
});
