// What this package's tests repeat: catching the error an action throws, and a fresh
// temporary directory.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { CollectiveError } from '../../src/errors.js';

/** The CollectiveError `action` throws; fails the test when it throws something else or nothing. */
export function errorOf(action: () => unknown): CollectiveError {
  try {
    action();
  } catch (error) {
    expect(error).toBeInstanceOf(CollectiveError);
    return error as CollectiveError;
  }
  throw new Error('expected a CollectiveError');
}

/** A new empty directory under the system's temporary directory. */
export function temporaryDirectory(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}
