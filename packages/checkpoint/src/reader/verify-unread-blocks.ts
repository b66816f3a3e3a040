import { createHash } from 'node:crypto';
import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { CheckpointError } from '../errors';
import type { CheckpointMetadata, DataFileEntry } from '../format/checkpoint-format';
import type { PlannedRead } from './verified-range-reader';

/**
 * [Note: every byte is verified by some rank]
 * A load reads only the blocks a rank needs, so some bytes (another rank's padding, optimizer
 * buffers when no optimizer is loaded, index files) would never be checked. To make any changed
 * byte of a checkpoint fail the load, the files are split among the loading ranks (file i goes to
 * rank i mod W): the owner checks the index file against `indexSha256` and the data blocks that it
 * did not read itself against `blockDigests`. At the same world size with an optimizer, every rank
 * reads its own whole file, so this costs nothing more; otherwise at most one more read of the
 * checkpoint, spread over the ranks. Returns the bytes read.
 */
export function verifyOwnedFiles(
  directory: string,
  metadata: CheckpointMetadata,
  reads: readonly PlannedRead[],
  rank: number,
  worldSize: number,
): number {
  let bytesRead = 0;
  metadata.files.forEach((file, position) => {
    if (position % worldSize !== rank) return;
    verifyIndexFile(directory, file);
    const alreadyVerified = new Set<number>();
    for (const read of reads) {
      if (read.file !== file || read.byteLength === 0) continue;
      const first = Math.floor(read.byteOffset / file.blockBytes);
      const end = Math.ceil((read.byteOffset + read.byteLength) / file.blockBytes);
      for (let block = first; block < end; block++) alreadyVerified.add(block);
    }
    bytesRead += verifyDataBlocks(directory, file, alreadyVerified);
  });
  return bytesRead;
}

function verifyIndexFile(directory: string, file: DataFileEntry): void {
  const path = join(directory, file.index);
  if (!existsSync(path)) {
    throw new CheckpointError(`${path} is missing.`, {
      reason: 'missing',
      file: path,
      fix: 'restore the file from a copy of the checkpoint, or load an older checkpoint.',
    });
  }
  const digest = createHash('sha256').update(readFileSync(path)).digest('hex');
  if (digest !== file.indexSha256) {
    throw new CheckpointError(`${path} fails its SHA-256 check (indexSha256 in metadata.json).`, {
      reason: 'corrupt',
      file: path,
      expected: file.indexSha256,
      actual: digest,
      fix: 'the file is damaged: restore it from a copy, or load an older checkpoint.',
    });
  }
}

function verifyDataBlocks(directory: string, file: DataFileEntry, skip: ReadonlySet<number>): number {
  const path = join(directory, file.file);
  let descriptor: number;
  try {
    descriptor = openSync(path, 'r');
  } catch (error) {
    throw new CheckpointError(`${path} is missing.`, {
      reason: 'missing',
      file: path,
      cause: error,
      fix: 'restore the file from a copy of the checkpoint, or load an older checkpoint.',
    });
  }
  try {
    const size = fstatSync(descriptor).size;
    const blocks = Math.ceil(file.bytes / file.blockBytes);
    if (size !== file.bytes || file.blockDigests.length !== blocks) {
      throw new CheckpointError(`${path} has ${size} bytes, the checkpoint recorded ${file.bytes}.`, {
        reason: size < file.bytes ? 'truncated' : 'corrupt',
        file: path,
        expected: file.bytes,
        actual: size,
        fix: 'the file was cut short or replaced: restore it, or load an older checkpoint.',
      });
    }
    const buffer = Buffer.allocUnsafe(Math.min(file.blockBytes, Math.max(file.bytes, 1)));
    let bytesRead = 0;
    for (let block = 0; block < blocks; block++) {
      if (skip.has(block)) continue;
      const start = block * file.blockBytes;
      const length = Math.min(file.blockBytes, file.bytes - start);
      let filled = 0;
      while (filled < length) {
        const count = readSync(descriptor, buffer, filled, length - filled, start + filled);
        if (count === 0) break;
        filled += count;
      }
      bytesRead += filled;
      const digest = createHash('sha256').update(buffer.subarray(0, filled)).digest('hex');
      if (digest !== file.blockDigests[block]) {
        const segments = file.segments
          .filter(
            (segment) =>
              segment.byteOffset < start + length && segment.byteOffset + segment.numel * 4 > start,
          )
          .map((segment) => `unit '${segment.unit}' handle ${segment.handle} ${segment.buffer}`);
        throw new CheckpointError(
          `${path}: bytes ${start}..${start + length} fail their SHA-256 check; they hold ${segments.join(', ') || 'no segment'}.`,
          {
            reason: 'corrupt',
            file: path,
            expected: file.blockDigests[block],
            actual: digest,
            fix: 'the file is damaged: restore it from a copy, or load an older checkpoint.',
          },
        );
      }
    }
    return bytesRead;
  } finally {
    closeSync(descriptor);
  }
}
