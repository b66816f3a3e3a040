/**
 * The worker preamble's failure recorder ([Note: failure records]) in plain node processes: what
 * it writes for an uncaught fsdp-ts error and its cause, that it prints nothing (unless
 * FSDP_DEBUG=1) and exits 1, and that a script's own 'uncaughtException' listener keeps control.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readFailureRecord } from '../src/launcher/failure-report.js';
import { PARENT_WATCHDOG_IMPORT } from '../src/launcher/worker-command.js';
import { temporaryDirectory } from './support/fixtures.js';

// An error shaped like the project's (the marker, typed fields, " Fix: …" appended) with a cause.
const THROW_PROJECT_ERROR = `
const cause = new RangeError('index 9 out of range');
const error = new Error('GPT.forward: bad tokens. Fix: pass int32 ids.', { cause });
error.name = 'NnError';
Object.assign(error, { code: 'shape-mismatch', fix: 'pass int32 ids.', rank: 1 });
Object.defineProperty(error, Symbol.for('fsdp-ts.error'), { value: true });
setTimeout(() => { throw error; }, 1);
`;

function runWorker(code: string, env: NodeJS.ProcessEnv = {}) {
  const directory = temporaryDirectory('fsdp-failure-recorder-');
  const files = {
    FSDP_ERROR_FILE: join(directory, 'rank-1.error.json'),
    FSDP_ERROR_LOG: join(directory, 'rank-1.log'),
  };
  const result = spawnSync(
    process.execPath,
    ['--import', PARENT_WATCHDOG_IMPORT, '--input-type=module', '-e', code],
    {
      env: { ...process.env, FSDP_LAUNCHER_PID: '', FSDP_DEBUG: '', RANK: '1', ...files, ...env },
      encoding: 'utf8',
      timeout: 30_000,
    },
  );
  return { ...result, files };
}

describe('the failure recorder', () => {
  it('writes the record and the log, prints nothing and exits 1', () => {
    const { status, stderr, files } = runWorker(THROW_PROJECT_ERROR);
    expect(status, stderr).toBe(1);
    expect(stderr).toBe('');
    const record = readFailureRecord(files.FSDP_ERROR_FILE);
    expect(record).toMatchObject({
      version: 1,
      rank: 1,
      origin: 'uncaughtException',
      log: files.FSDP_ERROR_LOG,
      error: {
        name: 'NnError',
        code: 'shape-mismatch',
        message: 'GPT.forward: bad tokens.',
        fix: 'pass int32 ids.',
        rank: 1,
        project: true,
        cause: { name: 'RangeError', message: 'index 9 out of range', project: false },
      },
    });
    expect(record?.error.stack).toMatch(/^NnError: GPT\.forward/);
    const log = readFileSync(files.FSDP_ERROR_LOG, 'utf8');
    expect(log).toMatch(/^rank 1 \(pid \d+, uncaughtException, /);
    expect(log).toMatch(/\[cause\]: RangeError: index 9 out of range\n\s+at /);
  });

  it('records an unhandled rejection; FSDP_DEBUG=1 prints the full error too', () => {
    const { status, stderr, files } = runWorker("Promise.reject(new TypeError('no width'));", {
      FSDP_DEBUG: '1',
    });
    expect(status).toBe(1);
    expect(stderr).toMatch(/^TypeError: no width\n\s+at /);
    expect(readFailureRecord(files.FSDP_ERROR_FILE)).toMatchObject({
      origin: 'unhandledRejection',
      error: { name: 'TypeError', message: 'no width', project: false },
    });
  });

  it("leaves a script's own uncaughtException listener in control", () => {
    const code = `process.on('uncaughtException', () => { console.log('handled'); process.exit(4); });
throw new Error('mine');`;
    const { status, stdout, files } = runWorker(code);
    expect(status).toBe(4);
    expect(stdout).toBe('handled\n');
    expect(existsSync(files.FSDP_ERROR_FILE)).toBe(true);
  });
});
