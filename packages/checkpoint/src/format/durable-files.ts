import { closeSync, fsyncSync, openSync, renameSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/** fsync of a directory, so the names created or renamed in it survive a power loss. */
export function fsyncDirectory(path: string): void {
  const descriptor = openSync(path, 'r');
  try {
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
}

/** Writes `bytes` to `path` durably: fsynced, then fsynced again by its directory. */
export function writeFileDurably(path: string, bytes: Uint8Array | string): void {
  const descriptor = openSync(path, 'w');
  try {
    const data = typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
    let written = 0;
    while (written < data.byteLength) written += writeSync(descriptor, data, written);
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
}

/** Replaces `path` atomically: a reader sees the old content or the new one, never a mix. */
export function replaceFileAtomically(path: string, bytes: Uint8Array | string): void {
  const temporary = join(dirname(path), `.${basename(path)}.tmp-${process.pid}-${Date.now()}`);
  writeFileDurably(temporary, bytes);
  renameSync(temporary, path);
  fsyncDirectory(dirname(path));
}
