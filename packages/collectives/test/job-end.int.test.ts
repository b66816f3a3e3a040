/**
 * Jobs end like PyTorch's ([Note: process exit] in src/internal/communication-client.ts, [Note:
 * clean departure] in src/internal/tcp/peer-link.ts): a script that ends, or calls
 * `process.exit(0)`, after the same collectives on every rank makes the job exit 0, with or
 * without destroy(); work still queued at exit is finished, or reported.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { spawnThreadRanks } from '../src/index.js';
import { bundleLauncher, fixture, launch } from './launcher-harness.js';

const rankScript = fixture('job-end-rank.ts');
const threadRank = new URL('./fixtures/job-end-thread-rank.ts', import.meta.url);
/** A job that has not exited by then is stuck (fsdp-run gets SIGTERM, then SIGKILL). */
const JOB_BOUND_MS = 25_000;

interface JobRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Each rank's `RESULT` line, by rank. */
  results: Map<number, { wrong: number }>;
  elapsedMs: number;
}

/** Runs `fsdp-run --nproc-per-node <size> job-end-rank.ts <mode>`, bounded by JOB_BOUND_MS. */
async function job(size: number, mode: string, env: NodeJS.ProcessEnv = {}): Promise<JobRun> {
  const started = Date.now();
  const run = launch(['--nproc-per-node', String(size), rankScript, mode], env);
  const stop = setTimeout(() => {
    run.child.kill('SIGTERM');
    setTimeout(() => run.child.kill('SIGKILL'), 5_000).unref();
  }, JOB_BOUND_MS);
  const { code, signal } = await run.exited;
  clearTimeout(stop);
  const results = new Map<number, { wrong: number }>();
  for (const line of run.stdout().split('\n')) {
    const match = /^\[rank (\d+)\] RESULT (.*)$/.exec(line);
    if (match !== null) results.set(Number(match[1]), JSON.parse(match[2]!));
  }
  return {
    code,
    signal,
    stdout: run.stdout(),
    stderr: run.stderr(),
    results,
    elapsedMs: Date.now() - started,
  };
}

function expectClean(run: JobRun, size: number): void {
  const output = `${run.stdout}\n${run.stderr}`;
  expect(run.code, output).toBe(0);
  expect(run.elapsedMs, output).toBeLessThan(JOB_BOUND_MS);
  expect([...run.results.keys()].sort(), output).toEqual(Array.from({ length: size }, (_, rank) => rank));
  for (const result of run.results.values()) expect(result, output).toEqual({ wrong: 0 });
  expect(run.stderr, output).not.toMatch(/fsdp-ts: rank|CollectiveError/);
}

describe('jobs end like PyTorch', () => {
  beforeAll(async () => {
    await bundleLauncher();
  });

  it('tcp: a script that ends after its collectives, without destroy(), ends the job with code 0 (W=2, W=3, and with destroy)', async () => {
    const [two, three, destroyed] = await Promise.all([job(2, 'end'), job(3, 'end'), job(3, 'destroy')]);
    expectClean(two, 2);
    expectClean(three, 3);
    expectClean(destroyed, 3);
  }, 90_000);

  // The race of process.exit(0) right after the last collective: a rank that finished the op
  // exits while a peer still reads its bytes. Before the goodbye it failed most W=3 jobs and
  // about half the W=2 ones; six jobs, three at a time, over both data paths.
  it('tcp: process.exit(0) right after the last collective never fails a peer (6 jobs, native and node:net paths)', async () => {
    const jobs: [number, NodeJS.ProcessEnv][] = [
      [3, {}],
      [2, {}],
      [3, { FSDP_TCP_NATIVE: '0' }],
      [3, {}],
      [2, { FSDP_TCP_NATIVE: '0' }],
      [3, { FSDP_TCP_LOCAL: 'tcp' }],
    ];
    const runs: JobRun[] = [];
    for (let start = 0; start < jobs.length; start += 3)
      runs.push(
        ...(await Promise.all(jobs.slice(start, start + 3).map(([size, env]) => job(size, 'exit', env)))),
      );
    for (const [index, run] of runs.entries()) expectClean(run, jobs[index]![0]);
  }, 150_000);

  it('tcp: ops still queued at process.exit(0) are finished first, on every rank', async () => {
    const run = await job(3, 'exit-queued');
    expectClean(run, 3);
    expect(run.stdout, run.stderr).toMatch(/^\[rank 0\] QUEUED \{"wrong":0\}$/m);
  }, 60_000);

  it('tcp: an op only one rank issued and never waited for is reported in one stderr line, and its exit code is 1', async () => {
    const run = await job(3, 'extra');
    const output = `${run.stdout}\n${run.stderr}`;
    expect(run.code, output).not.toBe(0);
    expect(run.elapsedMs, output).toBeLessThan(JOB_BOUND_MS);
    const reports = run.stderr.split('\n').filter((line) => line.includes('fsdp-ts: rank'));
    expect(reports, output).toHaveLength(1);
    expect(reports[0]).toMatch(
      /^\[rank 2\] fsdp-ts: rank 2 exited with 1 collective it never waited for that did not succeed: allGather \(1000 float32 elements\) failed: allGather #52 \(1000 float32 elements\) on rank 2 failed \(peer rank [01]\): rank [01] left the group: its process ended normally after 51 collectives, and this rank needs more from it/,
    );
    expect(run.stderr, output).toMatch(/rank 2 \(local rank 2\) exited with code 1/);
    // The ranks that ended are not blamed and fail nothing.
    for (const rank of [0, 1])
      expect(run.stderr, output).not.toMatch(new RegExp(`\\[rank ${rank}\\].*Error`));
  }, 60_000);

  it('shm: thread ranks that return without destroy(), or call process.exit(0), end; ops queued at exit are finished', async () => {
    const size = 3;
    const queued = 4;
    const ended = await spawnThreadRanks(size, threadRank, 'main', {
      args: { mode: 'end', count: 20, queued: 0, shared: new SharedArrayBuffer(0) },
      timeoutMs: 20_000,
    });
    expect(ended).toEqual([{ wrong: 0 }, { wrong: 0 }, { wrong: 0 }]);
    const shared = new SharedArrayBuffer(size * queued * 4 * 4);
    const exited = await spawnThreadRanks(size, threadRank, 'main', {
      args: { mode: 'exit-queued', count: 20, queued, shared },
      timeoutMs: 20_000,
    });
    expect(exited).toEqual([undefined, undefined, undefined]);
    // Each queued all-reduce finished before its thread ended: sum over ranks of (rank + index).
    const values = new Float32Array(shared);
    for (let rank = 0; rank < size; rank++)
      for (let index = 0; index < queued; index++)
        for (let element = 0; element < 4; element++)
          expect(values[(rank * queued + index) * 4 + element]).toBe(3 + 3 * index);
  }, 60_000);
});
