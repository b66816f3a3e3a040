/**
 * Offloaded optimizer state on a full disk: a 1 MiB tmpfs filled up to a few KiB, W = 2 thread
 * ranks. The first step fails on every rank (FsdpError 'offload-failed', ENOSPC on the rank that
 * hit it, naming its file) with the model unchanged and no files left; once the space is back the
 * step runs and training equals the run without offload, and a checkpoint saves there. Needs root
 * (mount), like checkpoint-disk-full.int.test.ts: without it the test fails with the mount error.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DiskFullOffloadReport } from './fixtures/offload-disk-full-rank';

const fixture = new URL('./fixtures/offload-disk-full-rank.ts', import.meta.url);
const mountPoint = mkdtempSync(join(tmpdir(), 'fsdp-offload-full-'));

beforeAll(() => {
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mountPoint]);
});

afterAll(() => {
  execFileSync('umount', [mountPoint]);
  rmSync(mountPoint, { recursive: true, force: true });
});

describe('offloaded optimizer state on a full disk', () => {
  it('fails the step on every rank, model unchanged, and the step runs once space is back', async () => {
    const filler = join(mountPoint, 'filler');
    const stats = statfsSync(mountPoint);
    // Leave 8 KiB: less than the two slots of a rank's AdamW state for the tiny GPT.
    writeFileSync(filler, new Uint8Array(stats.bavail * stats.bsize - 8192));
    const reports = (await spawnThreadRanks(2, fixture, 'offloadDiskFullRank', {
      args: { mountPoint, filler },
      timeoutMs: 120_000,
    })) as DiskFullOffloadReport[];
    for (const report of reports) {
      expect(report.failure?.name, JSON.stringify(report.failure)).toBe('FsdpError');
      expect(report.failure!.code).toBe('offload-failed');
      expect(report.failure!.message).toMatch(/ENOSPC/);
      expect(report.failure!.file).toMatch(/rank-[01]\/optimizer-state-[01]\.bin$/);
      expect(report.failure!.message).toContain(report.failure!.file!);
      expect(report.modelUnchangedAfterFailure).toBe(true);
      expect(report.leftFiles).toBe(false);
      expect(report.offloaded).toEqual(report.reference);
      expect(report.saved).toBe(join(mountPoint, 'checkpoints', 'step-00000003'));
    }
  }, 150_000);
});
