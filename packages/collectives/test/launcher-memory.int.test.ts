import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { formatBytes, MemoryCgroup, parseMemorySize } from '../src/launcher/memory-cap.js';
import { bundleLauncher, fixture, freePort, launch, linesOf } from './launcher-harness.js';

/**
 * Whether this process may create memory cgroups (root on a cgroup v1 or v2 machine, as CI is).
 * Where it may not, the real-cap tests are skipped with the reason printed, and the error test
 * runs instead.
 */
function cgroupsWritable(): string | undefined {
  try {
    MemoryCgroup.create(`fsdp-run-probe-${process.pid}`, 64 * 1024 ** 2).remove();
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

const notWritable = cgroupsWritable();
if (notWritable !== undefined) console.warn(`skipping the --memory-per-rank cap tests: ${notWritable}`);

beforeAll(async () => {
  await bundleLauncher();
});

describe('--memory-per-rank sizes', () => {
  it('parses sizes in powers of 1024 and rejects what is not one', () => {
    expect(parseMemorySize('2G')).toBe(2 * 1024 ** 3);
    expect(parseMemorySize('512M')).toBe(512 * 1024 ** 2);
    expect(parseMemorySize('1.5GiB')).toBe(1.5 * 1024 ** 3);
    expect(parseMemorySize('104857600')).toBe(104857600);
    expect(() => parseMemorySize('lots')).toThrow(
      /expected a size of at least 16M, got 'lots'.*--memory-per-rank 2G/,
    );
    expect(() => parseMemorySize('1M')).toThrow(/at least 16M/);
    expect(formatBytes(2 * 1024 ** 3)).toBe('2.00 GiB');
  });
});

describe.skipIf(notWritable !== undefined)('fsdp-run --memory-per-rank (real cgroups)', () => {
  it('reports the OOM kill of the rank that went past its cap, naming the rank and the cap', async () => {
    // Rank 0 stays well under 128 MiB; rank 1 touches 400 MiB and must be killed by the kernel.
    const job = launch([
      '--nproc-per-node',
      '2',
      '--memory-per-rank',
      '128M',
      fixture('memory-worker.js'),
      '8',
      '400',
    ]);
    const { code } = await job.exited;
    expect(code, job.stderr()).toBe(1);
    expect(job.stderr()).toContain(
      'rank 1 (local rank 1) was killed by the out-of-memory killer at its --memory-per-rank cap of 128.00 MiB',
    );
    expect(job.stderr()).toMatch(
      /rank 1 peak memory [\d.]+ MiB of its 128\.00 MiB cap \(killed: out of memory\)/,
    );
    expect(job.stdout()).not.toContain('rank 1 holds');
  });

  it('lets ranks under their cap finish, hands the cap to the workers, reports peaks and removes the cgroups', async () => {
    const job = launch([
      '--nproc-per-node',
      '2',
      '--memory-per-rank',
      '256M',
      fixture('memory-worker.js'),
      '8',
      '64',
    ]);
    const { code } = await job.exited;
    expect(code, job.stderr()).toBe(0);
    const stdout = linesOf(job.stdout());
    expect(stdout).toContain(`[rank 0] rank 0 holds 8 MiB and FSDP_MEMORY_LIMIT_BYTES=${256 * 1024 ** 2}`);
    expect(stdout).toContain(`[rank 1] rank 1 holds 64 MiB and FSDP_MEMORY_LIMIT_BYTES=${256 * 1024 ** 2}`);
    const peaks = [
      ...job.stderr().matchAll(/rank (\d) peak memory ([\d.]+) MiB of its 256\.00 MiB cap\.$/gm),
    ];
    expect(peaks.map((match) => match[1]).sort()).toEqual(['0', '1']);
    const peakOf = (rank: string) => Number(peaks.find((match) => match[1] === rank)![2]);
    // Rank 1 wrote 64 MiB, rank 0 8 MiB; both carry node's own ~40 MiB.
    expect(peakOf('1')).toBeGreaterThan(64);
    expect(peakOf('1') - peakOf('0')).toBeGreaterThan(40);
    const pid = job.child.pid!;
    const leftovers = cgroupDirectories().filter((name) => name.startsWith(`fsdp-run-${pid}-`));
    expect(leftovers).toEqual([]);
  });

  it('caps the workers of an elastic job (--nnodes 1:1) too: the OOM kill is named and ends the round', async () => {
    const job = launch(
      [
        ...['--nnodes', '1:1', '--master-port', String(await freePort()), '--nproc-per-node', '2'],
        ...['--memory-per-rank', '128M', '--grace-period', '1'],
        fixture('memory-worker.js'),
        '8',
        '400',
      ],
      { FSDP_JOB_SECRET: 'e'.repeat(64) },
    );
    const { code } = await job.exited;
    expect(code, job.stderr()).toBe(1);
    expect(job.stderr()).toContain(
      'rank 1 (local rank 1) was killed by the out-of-memory killer at its --memory-per-rank cap of 128.00 MiB',
    );
    expect(job.stderr()).toMatch(/rank 0 peak memory [\d.]+ MiB of its 128\.00 MiB cap\./);
    expect(linesOf(job.stdout())).toContain(
      `[rank 0] rank 0 holds 8 MiB and FSDP_MEMORY_LIMIT_BYTES=${128 * 1024 ** 2}`,
    );
    const pid = job.child.pid!;
    const deadline = Date.now() + 5_000;
    let leftovers = cgroupDirectories().filter((name) => name.startsWith(`fsdp-run-${pid}-`));
    while (leftovers.length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      leftovers = cgroupDirectories().filter((name) => name.startsWith(`fsdp-run-${pid}-`));
    }
    expect(leftovers).toEqual([]);
  });
});

describe.skipIf(notWritable === undefined)('fsdp-run --memory-per-rank without cgroup rights', () => {
  it('fails before starting any worker, saying why and how to fix it', async () => {
    const job = launch([
      '--nproc-per-node',
      '2',
      '--memory-per-rank',
      '128M',
      fixture('memory-worker.js'),
      '8',
      '8',
    ]);
    const { code } = await job.exited;
    expect(code).toBe(1);
    expect(job.stderr()).toContain('--memory-per-rank cannot cap the workers');
    expect(job.stdout()).toBe('');
  });
});

/** Names of the cgroups below this process's memory cgroup (v1 or v2). */
function cgroupDirectories(): string[] {
  const probe = MemoryCgroup.create(`fsdp-run-list-${process.pid}`, 64 * 1024 ** 2);
  const parent = join(probe.path, '..');
  probe.remove();
  return readdirSync(parent);
}
