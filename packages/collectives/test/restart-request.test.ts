import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RESTART_FLAG, restartRequestedLocally } from '../src/elastic/restart-request.js';

const file = join(tmpdir(), `fsdp-restart-request-test-${process.pid}`);

afterEach(() => {
  rmSync(file, { force: true });
  delete (globalThis as Record<symbol, unknown>)[RESTART_FLAG];
});

describe('restartRequestedLocally (the pre-restart request fsdp-run sends)', () => {
  it('is false without a request, true once FSDP_RESTART_FILE exists', () => {
    const env = { FSDP_RESTART_FILE: file };
    expect(restartRequestedLocally(env)).toBe(false);
    expect(restartRequestedLocally({})).toBe(false);
    writeFileSync(file, 'restart\n');
    expect(restartRequestedLocally(env)).toBe(true);
  });

  it('is true once the preload flag (set on SIGUSR2) is up, even without the file', () => {
    (globalThis as Record<symbol, unknown>)[RESTART_FLAG] = true;
    expect(restartRequestedLocally({})).toBe(true);
  });
});
