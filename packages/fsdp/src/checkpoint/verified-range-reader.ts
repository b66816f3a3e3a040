import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { CheckpointError } from './checkpoint-error';
import type { DataFileEntry } from './checkpoint-format';

/** Copy bytes [byteOffset, byteOffset + byteLength) of `file` into `target` from element `targetOffset`. */
export interface PlannedRead {
  file: DataFileEntry;
  byteOffset: number;
  byteLength: number;
  target: Float32Array;
  targetOffset: number;
  /** The parameter these bytes belong to (named in errors). */
  parameter: string;
}

const MAX_RUN_BYTES = 8 << 20;
const MAX_READ_BYTES = 4 << 20; // a multiple of 4: big reads are split so a run stays bounded

/**
 * Executes planned reads: per file, the verification blocks the reads touch are read once (merged
 * into runs of adjacent blocks), checked against their SHA-256 and copied out. Nothing outside
 * those blocks is read. Throws CheckpointError (missing, truncated, corrupt) naming the file and
 * the parameters concerned.
 */
export function executeReads(directory: string, reads: readonly PlannedRead[]): number {
  const byFile = new Map<DataFileEntry, PlannedRead[]>();
  for (const read of reads) {
    const list = byFile.get(read.file) ?? [];
    for (let done = 0; done < read.byteLength; done += MAX_READ_BYTES) {
      const byteLength = Math.min(MAX_READ_BYTES, read.byteLength - done);
      list.push({
        ...read,
        byteOffset: read.byteOffset + done,
        byteLength,
        targetOffset: read.targetOffset + done / 4,
      });
    }
    if (list.length > 0) byFile.set(read.file, list);
  }
  let bytesRead = 0;
  const scratch = { buffer: Buffer.allocUnsafe(0) };
  for (const [file, list] of byFile) bytesRead += readFile(directory, file, list, scratch);
  return bytesRead;
}

function readFile(
  directory: string,
  file: DataFileEntry,
  reads: PlannedRead[],
  scratch: { buffer: Buffer },
): number {
  const path = join(directory, file.file);
  const names = (selected: readonly PlannedRead[]) => [...new Set(selected.map((read) => read.parameter))];
  let descriptor: number;
  try {
    descriptor = openSync(path, 'r');
  } catch (error) {
    throw new CheckpointError(`${path} is missing; it holds ${names(reads).slice(0, 5).join(', ')}.`, {
      reason: 'missing',
      file: path,
      parameters: names(reads),
      cause: error,
      fix: 'restore the file from a copy of the checkpoint, or load an older checkpoint.',
    });
  }
  try {
    const size = fstatSync(descriptor).size;
    if (size !== file.bytes) {
      const beyond = reads.filter((read) => read.byteOffset + read.byteLength > size);
      throw new CheckpointError(
        `${path} has ${size} bytes, the checkpoint recorded ${file.bytes}${beyond.length > 0 ? `; parameter ${beyond[0]!.parameter} lies past its end` : ''}.`,
        {
          reason: size < file.bytes ? 'truncated' : 'corrupt',
          file: path,
          parameters: names(beyond.length > 0 ? beyond : reads),
          expected: file.bytes,
          actual: size,
          fix: 'the file was cut short or replaced: restore it, or load an older checkpoint.',
        },
      );
    }
    const sorted = [...reads].sort((left, right) => left.byteOffset - right.byteOffset);
    let bytesRead = 0;
    for (const run of blockRuns(sorted, file.blockBytes)) {
      const start = run.firstBlock * file.blockBytes;
      const end = Math.min(run.endBlock * file.blockBytes, file.bytes);
      // One scratch buffer for every run: fresh memory costs a page fault per 4 KiB.
      if (scratch.buffer.byteLength < end - start) scratch.buffer = Buffer.allocUnsafe(end - start);
      const bytes = scratch.buffer.subarray(0, end - start);
      let filled = 0;
      while (filled < bytes.byteLength) {
        const count = readSync(descriptor, bytes, filled, bytes.byteLength - filled, start + filled);
        if (count === 0) break;
        filled += count;
      }
      bytesRead += filled;
      for (let block = run.firstBlock; block < run.endBlock; block++) {
        const blockStart = block * file.blockBytes - start;
        const blockEnd = Math.min(blockStart + file.blockBytes, filled);
        const digest = createHash('sha256').update(bytes.subarray(blockStart, blockEnd)).digest('hex');
        if (digest !== file.blockDigests[block]) {
          const hit = run.reads.filter(
            (read) =>
              read.byteOffset < start + blockEnd && read.byteOffset + read.byteLength > start + blockStart,
          );
          throw new CheckpointError(
            `${path}: bytes ${start + blockStart}..${start + blockEnd} fail their SHA-256 check; they hold ${names(hit).join(', ')}.`,
            {
              reason: 'corrupt',
              file: path,
              parameters: names(hit),
              expected: file.blockDigests[block],
              actual: digest,
              fix: 'the file is damaged: restore it from a copy, or load an older checkpoint.',
            },
          );
        }
      }
      for (const read of run.reads) copyOut(read, bytes, start);
    }
    return bytesRead;
  } finally {
    closeSync(descriptor);
  }
}

interface BlockRun {
  firstBlock: number;
  endBlock: number;
  reads: PlannedRead[];
}

/** Groups sorted reads into runs of consecutive blocks (at most MAX_RUN_BYTES unless one read is larger). */
function blockRuns(sorted: readonly PlannedRead[], blockBytes: number): BlockRun[] {
  const runs: BlockRun[] = [];
  for (const read of sorted) {
    const firstBlock = Math.floor(read.byteOffset / blockBytes);
    const endBlock = Math.ceil((read.byteOffset + read.byteLength) / blockBytes);
    const last = runs.at(-1);
    if (
      last !== undefined &&
      firstBlock <= last.endBlock &&
      (endBlock - last.firstBlock) * blockBytes <= MAX_RUN_BYTES
    ) {
      last.endBlock = Math.max(last.endBlock, endBlock);
      last.reads.push(read);
    } else {
      runs.push({ firstBlock, endBlock, reads: [read] });
    }
  }
  return runs;
}

function copyOut(read: PlannedRead, bytes: Uint8Array, runStart: number): void {
  const target = new Uint8Array(
    read.target.buffer,
    read.target.byteOffset + read.targetOffset * 4,
    read.byteLength,
  );
  const from = read.byteOffset - runStart;
  target.set(bytes.subarray(from, from + read.byteLength));
}
