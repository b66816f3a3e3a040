import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';

/** fsync of a file or directory already written, so its content (or its names) survive a power loss. */
export function fsyncPath(path: string): void {
  const descriptor = openSync(path, 'r');
  try {
    fsyncSync(descriptor);
  } finally {
    closeSync(descriptor);
  }
}

/** Writes `bytes` to `path` and fsyncs it (the caller fsyncs the directory once all its files are written). */
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

export function sha256(bytes: Uint8Array | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export function sha256File(path: string): string {
  return sha256(readFileSync(path));
}
