import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { DescribedError, FailureRecord } from '../src/launcher/failure-report.js';
import {
  buildFailureReport,
  type RankOutcome,
  RunDirectory,
  rankList,
  topUserFrame,
} from '../src/launcher/failure-report.js';
import { temporaryDirectory } from './support/fixtures.js';

const repository = fileURLToPath(new URL('../../..', import.meta.url));

function crashed(rank: number, error: DescribedError): RankOutcome {
  const record: FailureRecord = {
    version: 1,
    rank,
    origin: 'uncaughtException',
    log: `/run/rank-${rank}.log`,
    error,
  };
  return { exit: { rank, localRank: rank, code: 1, signal: null }, record };
}

function ended(
  rank: number,
  how: { code?: number; signal?: NodeJS.Signals; stopped?: boolean },
): RankOutcome {
  const exit = {
    rank,
    localRank: rank,
    code: how.code ?? null,
    signal: how.signal ?? null,
    stopped: how.stopped === true,
  };
  return { exit, record: undefined };
}

const aborted = (rank: number, peer: number): DescribedError => ({
  name: 'CollectiveError',
  code: 'aborted',
  project: true,
  rank,
  peer,
  message: `The group was aborted on rank ${rank} by rank ${peer}: rank ${peer} failed with NnError: bad`,
  fix: `fix the failure on rank ${peer}.`,
});

const shapeError: DescribedError = {
  name: 'NnError',
  code: 'shape-mismatch',
  project: true,
  message: 'GPT.forward: int32 tokens of shape [32].',
  fix: 'pass int32 token ids of shape [batch, time].',
};

describe('rankList', () => {
  it('names one rank, a span, and spans', () => {
    expect(rankList([1])).toBe('rank 1');
    expect(rankList([1, 0])).toBe('ranks 0-1');
    expect(rankList([4, 0, 2, 3])).toBe('ranks 0, 2-4');
  });
});

describe('buildFailureReport', () => {
  it('reports the same error on every rank once, with its code, fix and every log', () => {
    const lines = buildFailureReport([crashed(0, shapeError), crashed(1, shapeError)]);
    expect(lines).toEqual([
      'failure on ranks 0-1: NnError (code shape-mismatch): GPT.forward: int32 tokens of shape [32].',
      '  Fix: pass int32 token ids of shape [batch, time].',
      '  stacks: /run/rank-0.log, /run/rank-1.log (FSDP_DEBUG=1 prints them here)',
    ]);
  });

  it("treats messages that differ only in each rank's own number as one failure ('each rank')", () => {
    const on = (rank: number): DescribedError => ({
      name: 'FsdpError',
      code: 'step-failed',
      project: true,
      rank,
      message: `The step failed on every rank: rank ${rank} threw: NnError: bad.`,
      fix: `fix the input that failed on rank ${rank}.`,
    });
    const lines = buildFailureReport([crashed(0, on(0)), crashed(1, on(1)), crashed(10, on(10))]);
    expect(lines[0]).toBe(
      'failure on ranks 0-1, 10: FsdpError (code step-failed): The step failed on every rank: each rank threw: NnError: bad.',
    );
    expect(lines[1]).toBe('  Fix: fix the input that failed on each rank.');
  });

  it('keeps different errors apart', () => {
    const other = { ...shapeError, message: 'GPT.forward: float32 tokens of shape [2, 8].' };
    const lines = buildFailureReport([crashed(0, shapeError), crashed(1, other)]);
    expect(lines.filter((line) => line.startsWith('failure on'))).toEqual([
      `failure on rank 0: NnError (code shape-mismatch): ${shapeError.message}`,
      `failure on rank 1: NnError (code shape-mismatch): ${other.message}`,
    ]);
  });

  it("folds a peer's abort and a step failure naming another rank into that rank's report", () => {
    const stepFailed: DescribedError = {
      name: 'FsdpError',
      code: 'step-failed',
      project: true,
      rank: 1,
      message: 'The step failed on every rank: rank 1 failed (seen on rank 2): x',
      cause: aborted(2, 1),
    };
    const lines = buildFailureReport([
      crashed(0, aborted(0, 1)),
      crashed(1, shapeError),
      crashed(2, stepFailed),
    ]);
    expect(lines).toEqual([
      `failure on rank 1: NnError (code shape-mismatch): ${shapeError.message}`,
      `  Fix: ${shapeError.fix}`,
      '  ranks 0, 2 failed as a consequence (CollectiveError aborted, FsdpError step-failed naming rank 1)',
      '  stacks: /run/rank-1.log, /run/rank-0.log, /run/rank-2.log (FSDP_DEBUG=1 prints them here)',
    ]);
  });

  it('folds a lost connection into the failure of the peer that ended without a record', () => {
    const lost: DescribedError = {
      name: 'CollectiveError',
      code: 'peer-lost',
      project: true,
      rank: 0,
      peer: 1,
      message: 'allReduce #1 on rank 0 failed (peer rank 1): the connection to rank 1 failed',
    };
    const lines = buildFailureReport([
      crashed(0, lost),
      ended(1, { signal: 'SIGKILL' }),
      ended(2, { signal: 'SIGTERM', stopped: true }),
    ]);
    expect(lines).toEqual([
      'failure on rank 1: was killed by signal SIGKILL, without an uncaught error (its output above says why).',
      '  rank 0 failed as a consequence (CollectiveError peer-lost naming rank 1)',
      '  stacks: /run/rank-0.log (FSDP_DEBUG=1 prints them here)',
      'stopped by fsdp-run after the failure: rank 2.',
    ]);
  });

  it('a lost connection to a peer that did not fail is a failure of its own; exits 0 are not mentioned', () => {
    const lost = { ...aborted(0, 1), code: 'peer-lost', message: 'lost rank 1' };
    const lines = buildFailureReport([crashed(0, lost), ended(1, { code: 0 })]);
    expect(lines[0]).toBe('failure on rank 0: CollectiveError (code peer-lost): lost rank 1');
    expect(lines.filter((line) => line.startsWith('failure on'))).toHaveLength(1);
    expect(lines.join('\n')).not.toMatch(/consequence|stopped by/);
  });

  it("lists the consequences of another node's rank under a short entry for that rank", () => {
    const lines = buildFailureReport([crashed(0, aborted(0, 3)), crashed(1, aborted(1, 3))]);
    expect(lines).toEqual([
      'failure on rank 3, of another node (its fsdp-run reports the error):',
      `  seen here as: CollectiveError (code aborted): ${aborted(0, 3).message}`,
      '  ranks 0-1 failed as a consequence (CollectiveError aborted naming rank 3)',
      '  stacks: /run/rank-0.log, /run/rank-1.log (FSDP_DEBUG=1 prints them here)',
    ]);
  });

  it('makes no report when fsdp-run stopped every worker that ended non-zero', () => {
    expect(
      buildFailureReport([ended(0, { signal: 'SIGTERM', stopped: true }), ended(1, { code: 0 })]),
    ).toEqual([]);
  });

  it('drops no rank when the ranks blame each other', () => {
    const lines = buildFailureReport([crashed(0, aborted(0, 1)), crashed(1, aborted(1, 0))]);
    expect(lines.join('\n')).toMatch(/failure on (rank 0|ranks 0-1)/);
    expect(lines.join('\n')).toContain('/run/rank-0.log');
    expect(lines.join('\n')).toContain('/run/rank-1.log');
  });

  it("advises fixing the user's top frame for an error that is not fsdp-ts's, and names it under a step failure", () => {
    const script = join(repository, 'packages/fsdp/test/fixtures/train.ts');
    const stack = [
      "TypeError: Cannot read properties of undefined (reading 'width')",
      `    at width (${join(repository, 'packages/nn/src/layers/gpt.ts')}:88:13)`,
      `    at userCode (file://${script}:12:5)`,
      '    at node:internal/modules/esm/module_job:271:25',
    ].join('\n');
    const typeError: DescribedError = {
      name: 'TypeError',
      project: false,
      message: "Cannot read properties of undefined (reading 'width')",
      stack,
    };
    const [, fix] = buildFailureReport([crashed(1, typeError)]);
    expect(fix).toBe(
      `  Fix: an error of the program itself: fix the code at ${script}:12:5 (the top frame of its stack in your code), then start the job again.`,
    );
    const wrapped: DescribedError = {
      ...shapeError,
      name: 'FsdpError',
      code: 'step-failed',
      rank: 1,
      cause: typeError,
    };
    expect(buildFailureReport([crashed(1, wrapped)])).toContain(
      `  thrown at: ${script}:12:5 (TypeError: Cannot read properties of undefined (reading 'width'))`,
    );
  });

  it('lists three logs by path and the rest by count', () => {
    const lines = buildFailureReport([0, 1, 2, 3, 4].map((rank) => crashed(rank, shapeError)));
    expect(lines.at(-1)).toBe(
      '  stacks: /run/rank-0.log, /run/rank-1.log, /run/rank-2.log and 2 more (rank-N.log) in /run (FSDP_DEBUG=1 prints them here)',
    );
  });
});

describe('topUserFrame', () => {
  it("skips Node's frames, dependencies and fsdp-ts's src/, keeps the repository's test fixtures", () => {
    const fixture = join(repository, 'packages/fsdp/test/fixtures/x.ts');
    const stack = [
      'Error: x',
      '    at node:internal/process/task_queues:95:5',
      `    at f (${join(repository, 'node_modules/@tensorflow/tfjs-core/dist/x.js')}:1:2)`,
      `    at GPT.forward (${join(repository, 'packages/nn/src/layers/gpt.ts')}:88:13)`,
      `    at ${fixture}:3:4`,
    ].join('\n');
    expect(topUserFrame(stack)).toBe(`${fixture}:3:4`);
    expect(topUserFrame('Error: x\n    at node:internal/x:1:1')).toBeUndefined();
  });
});

describe('RunDirectory', () => {
  it('removes a run directory nobody wrote into, and keeps one with a record', () => {
    const parent = temporaryDirectory('fsdp-run-directory-test-');
    const empty = new RunDirectory(parent);
    const emptyAttempt = empty.attempt('attempt-0');
    empty.close();
    expect(existsSync(emptyAttempt.path)).toBe(false);
    const written = new RunDirectory(parent);
    const attempt = written.attempt('attempt-0');
    const files = attempt.environmentOf(3);
    expect(files.FSDP_ERROR_LOG).toBe(join(attempt.path, 'rank-3.log'));
    writeFileSync(files.FSDP_ERROR_LOG, 'stack');
    written.close();
    expect(existsSync(files.FSDP_ERROR_LOG)).toBe(true);
  });
});
