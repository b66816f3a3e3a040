import { createHash, type Hash } from 'node:crypto';
import { closeSync, fdatasyncSync, fsyncSync, openSync, writeSync } from 'node:fs';
import { CheckpointError } from '../errors';
import type { Segment } from '../format/checkpoint-format';
import type { StreamedValues, WrittenPiece } from '../sharded-state/optimizer-state';

/**
 * A data file's `sha256` from format version 3 on: the SHA-256 of its block digests in order,
 * each as 64 lowercase hex digits followed by a newline. Offline, for a file of 1 MiB blocks:
 * `split -b 1048576 --filter='sha256sum | cut -c1-64' shard-00000-of-00004.bin | sha256sum`.
 * (Versions 1 and 2 recorded the SHA-256 of the file's bytes; no load reads either.)
 */
export function blockListDigest(blockDigests: readonly string[]): string {
  const hash = createHash('sha256');
  for (const digest of blockDigests) hash.update(`${digest}\n`, 'latin1');
  return hash.digest('hex');
}

/** How a RankFileWriter bounds what it holds: bytes per write call, and dirty bytes before a sync. */
export interface WriteLimits {
  /** Bytes handed to one write (and to the digests) at a time. Default 8 MiB. */
  chunkBytes: number;
  /** Bytes written before fdatasync waits for them to reach the disk. Default 64 MiB. */
  syncBytes: number;
}

export const DEFAULT_WRITE_LIMITS: WriteLimits = { chunkBytes: 8 << 20, syncBytes: 64 << 20 };

/**
 * Writes one rank's data file: segments of raw little-endian float32 appended in order, hashed as
 * they go (SHA-256 of every `blockBytes` block), fsynced on finish.
 *
 * [Note: every byte hashed once]
 * Each byte goes through SHA-256 once, for its block's digest. The file's `sha256` (format
 * version 3) is derived from the block digests ({@link blockListDigest}), not computed over the
 * bytes a second time: hashing is the writer's main CPU cost (about 0.65 s per GB per core, as
 * much as the write itself), and four ranks on two cores made the save CPU-bound.
 *
 * [Note: bounded dirty pages]
 * Each segment is written from the memory it lives in (no copy), in chunks of `chunkBytes`, and
 * every `syncBytes` the writer waits (fdatasync) for what it wrote to reach the disk. Page cache
 * a write dirties is charged to the writer's memory cgroup, and a cgroup (v1 in particular)
 * cannot always write dirty pages back fast enough to make room: a 99 M-parameter rank capped at
 * 2 GiB was OOM-killed while saving. Clean cached pages are reclaimed at no risk, so a rank holds
 * at most `syncBytes` of dirty file data whatever the checkpoint's size.
 */
export class RankFileWriter {
  readonly segments: Segment[] = [];
  readonly blockDigests: string[] = [];
  private readonly descriptor: number;
  private blockHash: Hash = createHash('sha256');
  private blockFill = 0;
  private position = 0;
  private state: 'open' | 'finished' = 'open';
  private zeros = new Uint8Array(0);
  private unsynced = 0;
  /** Bytes of streamed values written ([Note: streamed values]). */
  streamedBytes = 0;
  /** The longest run a streamed value handed over at once, in bytes: what its producer staged. */
  streamedRunBytesHighWater = 0;

  constructor(
    readonly path: string,
    readonly blockBytes: number,
    readonly limits: WriteLimits = DEFAULT_WRITE_LIMITS,
  ) {
    this.descriptor = openSync(path, 'w');
  }

  /** Appends `data` as the segment (unit, handle, buffer). */
  append(unit: string, handle: number, buffer: string, data: Float32Array): void {
    this.expectOpen('append');
    this.segments.push({ unit, handle, buffer, byteOffset: this.position, numel: data.length });
    this.writeBytes(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  }

  /**
   * Appends a segment of `numel` elements given as pieces at element offsets (sorted, disjoint),
   * zeros elsewhere: no flat copy of the whole segment is made.
   */
  appendPieces(
    unit: string,
    handle: number,
    buffer: string,
    numel: number,
    pieces: readonly WrittenPiece[],
  ): void {
    this.expectOpen('appendPieces');
    this.segments.push({ unit, handle, buffer, byteOffset: this.position, numel });
    let cursor = 0;
    // Empty pieces (a parameter with no elements on this rank) say offset 0: skip them.
    const present = pieces.filter((piece) => piece.values.length > 0);
    for (const piece of present.sort((left, right) => left.offset - right.offset)) {
      this.writeZeros(piece.offset - cursor);
      const { values } = piece;
      if (values instanceof Float32Array) {
        this.writeBytes(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
      } else {
        this.writeStreamed(values, `${unit}#${handle} '${buffer}'`);
      }
      cursor = piece.offset + values.length;
    }
    this.writeZeros(numel - cursor);
  }

  /** Writes the runs a streamed value produces ([Note: streamed values]); exactly `values.length` elements. */
  private writeStreamed(values: StreamedValues, what: string): void {
    let produced = 0;
    values.stream((run) => {
      if (produced + run.length > values.length) {
        throw new CheckpointError(
          `The streamed values of ${what} produced more than the ${values.length} elements they declared.`,
          {
            reason: 'invalid-input',
            expected: values.length,
            actual: produced + run.length,
            fix: 'this is a bug in the producer of the streamed values: report it.',
          },
        );
      }
      this.streamedRunBytesHighWater = Math.max(this.streamedRunBytesHighWater, run.byteLength);
      this.writeBytes(new Uint8Array(run.buffer, run.byteOffset, run.byteLength));
      this.streamedBytes += run.byteLength;
      produced += run.length;
    });
    if (produced !== values.length) {
      throw new CheckpointError(
        `The streamed values of ${what} produced ${produced} of the ${values.length} elements they declared.`,
        {
          reason: 'invalid-input',
          expected: values.length,
          actual: produced,
          fix: 'this is a bug in the producer of the streamed values: report it.',
        },
      );
    }
  }

  /** Writes `count` float32 zeros from one buffer of at most a chunk. */
  private writeZeros(count: number): void {
    let bytes = count * 4;
    if (bytes <= 0) return;
    if (this.zeros.byteLength < Math.min(bytes, this.limits.chunkBytes))
      this.zeros = new Uint8Array(Math.min(bytes, this.limits.chunkBytes));
    while (bytes > 0) {
      const take = Math.min(bytes, this.zeros.byteLength);
      this.writeBytes(this.zeros.subarray(0, take));
      bytes -= take;
    }
  }

  /** Writes `bytes` a chunk at a time ([Note: bounded dirty pages]). */
  private writeBytes(bytes: Uint8Array): void {
    for (let start = 0; start < bytes.byteLength; start += this.limits.chunkBytes) {
      this.writeChunk(bytes.subarray(start, Math.min(start + this.limits.chunkBytes, bytes.byteLength)));
    }
  }

  private writeChunk(bytes: Uint8Array): void {
    let written = 0;
    while (written < bytes.byteLength) {
      written += writeSync(this.descriptor, bytes, written, bytes.byteLength - written);
    }
    this.unsynced += bytes.byteLength;
    if (this.unsynced >= this.limits.syncBytes) {
      fdatasyncSync(this.descriptor);
      this.unsynced = 0;
    }
    let consumed = 0;
    while (consumed < bytes.byteLength) {
      const take = Math.min(this.blockBytes - this.blockFill, bytes.byteLength - consumed);
      this.blockHash.update(bytes.subarray(consumed, consumed + take));
      consumed += take;
      this.blockFill += take;
      if (this.blockFill === this.blockBytes) this.closeBlock();
    }
    this.position += bytes.byteLength;
  }

  /** fsyncs and closes the file; returns its size and digests. */
  finish(): { bytes: number; sha256: string } {
    this.expectOpen('finish');
    if (this.blockFill > 0) this.closeBlock();
    try {
      fsyncSync(this.descriptor);
    } finally {
      closeSync(this.descriptor);
      this.state = 'finished';
    }
    return { bytes: this.position, sha256: blockListDigest(this.blockDigests) };
  }

  /** Closes the file without finishing it (after an error). */
  abandon(): void {
    if (this.state === 'finished') return;
    this.state = 'finished';
    closeSync(this.descriptor);
  }

  private closeBlock(): void {
    this.blockDigests.push(this.blockHash.digest('hex'));
    this.blockHash = createHash('sha256');
    this.blockFill = 0;
  }

  private expectOpen(method: string): void {
    if (this.state !== 'open') throw new Error(`RankFileWriter.${method}: the file is already closed.`);
  }
}
