// What this package's tests repeat: catching the error an action throws, and a fresh
// temporary directory.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { CollectiveError } from '../../src/errors.js';

/** The error `action` throws; fails the test when it throws nothing. */
export function errorOf(action: () => unknown): Error {
  try {
    action();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected an error');
}

/** The CollectiveError `action` throws; fails the test when it throws something else or nothing. */
export function collectiveErrorOf(action: () => unknown): CollectiveError {
  const error = errorOf(action);
  expect(error).toBeInstanceOf(CollectiveError);
  return error as CollectiveError;
}

/** A new empty directory under the system's temporary directory. */
export function temporaryDirectory(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}
