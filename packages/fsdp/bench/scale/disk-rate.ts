/**
 * The disk's sequential write rate, measured the way a checkpoint writes: `bytes` from one 8 MiB
 * buffer in 8 MiB writes, fdatasync every 64 MiB (as RankFileWriter does, so the page cache a
 * capped rank dirties stays bounded: [Note: bounded dirty pages]) and fsync at the end, without
 * hashing or metadata. Ranks call it at the same time between barriers, so the disk sees the same
 * bytes from the same number of writers as during the save. The offload rows also read the file
 * back past the page cache (timeUncachedRead), as the offload's reads find it under a memory cap.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, fdatasyncSync, fsyncSync, openSync, rmSync, writeSync } from 'node:fs';

const CHUNK = 8 << 20;
const SYNC_EVERY = 64 << 20;

/** Writes `bytes` to `file` and removes it (unless `keep`); returns the milliseconds taken (open to fsync). */
export function timeSequentialWrite(file: string, bytes: number, keep = false): number {
  const chunk = Buffer.alloc(CHUNK, 7);
  const started = performance.now();
  const descriptor = openSync(file, 'w');
  let unsynced = 0;
  for (let written = 0; written < bytes; ) {
    const take = Math.min(CHUNK, bytes - written);
    let done = 0;
    while (done < take) done += writeSync(descriptor, chunk, done, take - done);
    written += take;
    unsynced += take;
    if (unsynced >= SYNC_EVERY) {
      fdatasyncSync(descriptor);
      unsynced = 0;
    }
  }
  fsyncSync(descriptor);
  closeSync(descriptor);
  const elapsed = performance.now() - started;
  if (!keep) rmSync(file, { force: true });
  return elapsed;
}

/**
 * Reads `file` once with O_DIRECT (GNU dd, 8 MiB reads), so the bytes come from the disk and not
 * from the page cache the write left; removes it; returns the milliseconds taken.
 */
export function timeUncachedRead(file: string): number {
  const started = performance.now();
  const dd = spawnSync('dd', [`if=${file}`, 'of=/dev/null', 'bs=8M', 'iflag=direct'], { encoding: 'utf8' });
  const elapsed = performance.now() - started;
  rmSync(file, { force: true });
  if (dd.status !== 0) throw new Error(`dd iflag=direct could not read ${file}: ${dd.stderr}`);
  return elapsed;
}
