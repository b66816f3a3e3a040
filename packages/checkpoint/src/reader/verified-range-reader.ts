import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { CheckpointError } from '../errors';
import type { DataFileEntry } from '../format/checkpoint-format';
import type { StatePiece } from '../sharded-state/optimizer-state';

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

/** How much executeReads reads at once: a run of adjacent blocks, and the largest piece of a read. */
export interface ReadLimits {
  /** Bytes of adjacent blocks read (into one scratch buffer) and verified at a time. Default 8 MiB. */
  runBytes: number;
  /** Reads longer than this are split (a multiple of 4), so a run stays bounded. Default 4 MiB. */
  readBytes: number;
}

export const DEFAULT_READ_LIMITS: ReadLimits = { runBytes: 8 << 20, readBytes: 4 << 20 };

/**
 * Executes planned reads: per file, the verification blocks the reads touch are read once (merged
 * into runs of adjacent blocks, at most `runBytes` at a time into one scratch buffer), checked
 * against their SHA-256 and, with `mode` 'copy', copied into the reads' targets; 'verify' only
 * checks them. Nothing outside those blocks is read. Throws CheckpointError (missing, truncated,
 * corrupt) naming the file and the parameters concerned. See [Note: loads verify, agree, then
 * read in place] in read-checkpoint.ts.
 */
export function executeReads(
  directory: string,
  reads: readonly PlannedRead[],
  mode: 'verify' | 'copy' = 'copy',
  limits: ReadLimits = DEFAULT_READ_LIMITS,
): number {
  if (limits.readBytes % 4 !== 0 || limits.readBytes <= 0 || limits.runBytes <= 0) {
    throw new RangeError(
      `executeReads: readBytes must be a positive multiple of 4; got ${limits.readBytes}.`,
    );
  }
  const byFile = new Map<DataFileEntry, PlannedRead[]>();
  for (const read of reads) {
    const list = byFile.get(read.file) ?? [];
    for (let done = 0; done < read.byteLength; done += limits.readBytes) {
      const byteLength = Math.min(limits.readBytes, read.byteLength - done);
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
  for (const [file, list] of byFile)
    bytesRead += readFile(directory, file, list, scratch, mode === 'copy', limits.runBytes);
  return bytesRead;
}

function readFile(
  directory: string,
  file: DataFileEntry,
  reads: PlannedRead[],
  scratch: { buffer: Buffer },
  copy: boolean,
  runBytes: number,
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
    for (const run of blockRuns(sorted, file.blockBytes, runBytes)) {
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
      if (copy) for (const read of run.reads) copyOut(read, bytes, start);
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

/** Groups sorted reads into runs of consecutive blocks (at most `runBytes` unless one read is larger). */
function blockRuns(sorted: readonly PlannedRead[], blockBytes: number, runBytes: number): BlockRun[] {
  const runs: BlockRun[] = [];
  for (const read of sorted) {
    const firstBlock = Math.floor(read.byteOffset / blockBytes);
    const endBlock = Math.ceil((read.byteOffset + read.byteLength) / blockBytes);
    const last = runs.at(-1);
    if (
      last !== undefined &&
      firstBlock <= last.endBlock &&
      (endBlock - last.firstBlock) * blockBytes <= runBytes
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

/**
 * Points reads planned against a flat shard's layout (`targetOffset` in elements of the shard)
 * at the arrays that hold each parameter's part instead: `pieces` (sorted by `offset`), one per
 * parameter, each `values.length` elements starting `offset` elements into the shard. A read
 * lies inside one parameter's part (reads are planned per parameter); one that does not fit any
 * piece is a bug in the caller, thrown as such. No element of the flat layout is allocated.
 */
export function retargetToPieces(
  reads: readonly PlannedRead[],
  pieces: readonly StatePiece[],
  buffer: string,
): PlannedRead[] {
  const sorted = pieces
    .filter((piece) => piece.values.length > 0)
    .sort((left, right) => left.offset - right.offset);
  return reads.map((read) => {
    if (read.byteLength === 0) return read;
    const numel = read.byteLength / 4;
    const piece = findPiece(sorted, read.targetOffset);
    if (piece === undefined || read.targetOffset + numel > piece.offset + piece.values.length) {
      throw new Error(
        `retargetToPieces: no '${buffer}' array holds elements ${read.targetOffset}..${read.targetOffset + numel} of the shard (${read.parameter}); the optimizer reader named too few.`,
      );
    }
    return { ...read, target: piece.values, targetOffset: read.targetOffset - piece.offset };
  });
}

/** The last piece starting at or before `offset` (binary search). */
function findPiece(sorted: readonly StatePiece[], offset: number): StatePiece | undefined {
  let low = 0;
  let high = sorted.length - 1;
  let found: StatePiece | undefined;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if (sorted[middle]!.offset <= offset) {
      found = sorted[middle];
      low = middle + 1;
    } else high = middle - 1;
  }
  return found;
}
