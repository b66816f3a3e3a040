/**
 * One error report per job (issue 31, point 7): fsdp-run prints each distinct failure once, with
 * its ranks, code, message and fix, names the per-rank log files that hold the stacks, folds the
 * failures that follow from another rank's into that rank's report, and prints the stacks on
 * stderr only with FSDP_DEBUG=1 ([Note: one report per job], [Note: failure records]).
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { fsdpRunArguments } from '../../collectives/test/helpers/rank-commands';

const script = fileURLToPath(new URL('./fixtures/error-report-rank.ts', import.meta.url));

interface Job {
  code: number | null;
  stderr: string;
  /** The launcher's own lines (not the workers' prefixed output). */
  launcherLines: string[];
}

function runJob(mode: string, env: NodeJS.ProcessEnv = {}): Promise<Job> {
  const child = spawn(process.execPath, [...fsdpRunArguments(), '--nproc-per-node', '2', script, mode], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, FSDP_BLAS: 'off', FSDP_DEBUG: '', ...env },
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  child.stdout.resume();
  const timer = setTimeout(() => child.kill('SIGKILL'), 100_000);
  return new Promise((resolve) => {
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({
        code,
        stderr,
        launcherLines: stderr.split('\n').filter((line) => line.startsWith('fsdp-run')),
      });
    });
  });
}

function occurrences(text: string, part: string): number {
  return text.split(part).length - 1;
}

/** The log files the report's `stacks:` line names. */
function namedLogs(job: Job): string[] {
  const line = job.launcherLines.find((entry) => /^fsdp-run:\s+stacks: /.test(entry)) ?? '';
  return [...line.matchAll(/(\/\S+?\.log)\b/g)].map((match) => match[1]!);
}

const jobs: Record<'everyRank' | 'badGroup' | 'rankOne' | 'typeError', Promise<Job>> = {} as never;

beforeAll(() => {
  // Started together: each waits mostly on process start-up.
  jobs.everyRank = runJob('every-rank');
  jobs.badGroup = runJob('bad-group');
  jobs.rankOne = runJob('rank-1', { FSDP_DEBUG: '1' });
  jobs.typeError = runJob('type-error');
});

describe('fsdp-run reports each distinct failure once', () => {
  it('every rank throws the same error: one report naming both ranks, its code, message, fix and logs', async () => {
    const job = await jobs.everyRank;
    expect(job.code, job.stderr).toBe(1);
    const failures = job.launcherLines.filter((line) => line.includes(': failure on '));
    expect(failures, job.stderr).toHaveLength(1);
    // Both ranks threw; the slower one may meet the faster one's abort first ([Note: step
    // failure]): then it is that rank's consequence. Either way the report names both.
    const [, ranks, first] =
      /failure on (ranks 0-1|rank ([01])): \w+Error \(code [\w-]+\): /.exec(failures[0]!) ?? [];
    expect(ranks, job.stderr).toBeDefined();
    if (first !== undefined) {
      expect(job.stderr).toMatch(
        new RegExp(
          `^fsdp-run:\\s+rank ${1 - Number(first)} failed as a consequence \\(.* naming rank ${first}\\)`,
          'm',
        ),
      );
    }
    expect(occurrences(job.stderr, 'GPT.forward: int32 tokens of shape [32]'), job.stderr).toBe(1);
    // The fix: one line, whatever the error carries, and nowhere else.
    const fixes = job.launcherLines.filter((line) => /^fsdp-run:\s+Fix: /.test(line));
    expect(fixes, job.stderr).toHaveLength(1);
    const fix = fixes[0]!.replace(/^fsdp-run:\s+Fix: /, '');
    expect(fix.length).toBeGreaterThan(10);
    expect(occurrences(job.stderr, fix), job.stderr).toBe(1);
    // The stacks are in the log files, not on stderr.
    expect(job.stderr).not.toMatch(/^\[rank \d\]\s+at /m);
    const logs = namedLogs(job);
    expect(logs.map((path) => path.split('/').at(-1)).sort()).toEqual(['rank-0.log', 'rank-1.log']);
    for (const path of logs) {
      expect(existsSync(path), path).toBe(true);
      const log = readFileSync(path, 'utf8');
      expect(log).toMatch(/^\s+at /m);
      expect(log).toMatch(/NnError: GPT\.forward: int32 tokens of shape \[32\]/);
      // A rank that threw holds the NnError's own stack; a consequence, the abort it met.
      const rank = Number(/rank-(\d)\.log$/.exec(path)![1]);
      if (first === undefined || rank === Number(first)) {
        expect(log).toMatch(/^\s+at GPT\.forward \(/m);
        expect(log).toContain("code: 'shape-mismatch'");
      }
    }
    // A handful of lines: the worker's prefixed lines are the tfjs/OpenBLAS notices only.
    expect(job.launcherLines.length, job.stderr).toBeLessThanOrEqual(6);
  }, 110_000);

  it("every rank throws the same CollectiveError, each naming itself: one failure on 'ranks 0-1'", async () => {
    const job = await jobs.badGroup;
    expect(job.code, job.stderr).toBe(1);
    const failures = job.launcherLines.filter((line) => line.includes(': failure on '));
    expect(failures, job.stderr).toEqual([
      'fsdp-run: failure on ranks 0-1: CollectiveError (code invalid-argument): newGroup([0, 0]) on each rank: ranks must be distinct and include the caller.',
    ]);
    const fixes = job.launcherLines.filter((line) => /^fsdp-run:\s+Fix: /.test(line));
    expect(fixes).toEqual([
      'fsdp-run:   Fix: call newGroup only on member ranks, with each rank listed once.',
    ]);
    expect(occurrences(job.stderr, 'ranks must be distinct')).toBe(1);
    expect(namedLogs(job).map((path) => path.split('/').at(-1))).toEqual(['rank-0.log', 'rank-1.log']);
    expect(job.stderr).not.toMatch(/^\[rank \d\]\s+at /m);
    expect(job.launcherLines.length, job.stderr).toBeLessThanOrEqual(5);
  }, 110_000);

  it('only rank 1 throws: one report naming rank 1 as the origin, rank 0 as a consequence; FSDP_DEBUG=1 prints the stacks', async () => {
    const job = await jobs.rankOne;
    expect(job.code, job.stderr).toBe(1);
    const failures = job.launcherLines.filter((line) => line.includes(': failure on '));
    expect(failures, job.stderr).toHaveLength(1);
    expect(failures[0]).toMatch(/failure on rank 1: /);
    expect(job.stderr).toMatch(/^fsdp-run:\s+rank 0 failed as a consequence \(.*naming rank 1\)/m);
    expect(namedLogs(job).map((path) => path.split('/').at(-1))).toEqual(['rank-1.log', 'rank-0.log']);
    expect(job.stderr).toMatch(/^\[rank 1\]\s+at GPT\.forward \(/m);
    expect(job.stderr).toMatch(/^\[rank 0\]\s+at /m);
  }, 110_000);

  it("an error of the script's own code: the fix names the script's frame and suggests no restart", async () => {
    const job = await jobs.typeError;
    expect(job.code, job.stderr).toBe(1);
    const failures = job.launcherLines.filter((line) => line.includes(': failure on '));
    expect(failures, job.stderr).toEqual([
      "fsdp-run: failure on rank 1: TypeError: Cannot read properties of undefined (reading 'width')",
    ]);
    const fix = job.launcherLines.find((line) => /^fsdp-run:\s+Fix: /.test(line)) ?? '';
    expect(fix, job.stderr).toMatch(
      /error-report-rank\.ts:\d+:\d+ \(the top frame of its stack in your code\)/,
    );
    expect(fix).not.toMatch(/restart|checkpoint/i);
    // Rank 0 lost its peer in the allReduce: folded into rank 1's report (or stopped, if slower).
    expect(job.stderr).toMatch(
      /rank 0 failed as a consequence \(CollectiveError peer-lost naming rank 1\)|stopped by fsdp-run after the failure: rank 0/,
    );
  }, 110_000);
});
