import { createHash, type Hash } from 'node:crypto';
import { closeSync, fsyncSync, openSync, writeSync } from 'node:fs';
import type { Segment } from './checkpoint-format';

/**
 * Writes one rank's data file: segments of raw little-endian float32 appended in order, hashed as
 * they go (SHA-256 of the whole file and of every `blockBytes` block), fsynced on finish.
 */
export class RankFileWriter {
  readonly segments: Segment[] = [];
  readonly blockDigests: string[] = [];
  private readonly descriptor: number;
  private readonly fileHash: Hash = createHash('sha256');
  private blockHash: Hash = createHash('sha256');
  private blockFill = 0;
  private position = 0;
  private state: 'open' | 'finished' = 'open';
  private zeros = new Float32Array(0);

  constructor(
    readonly path: string,
    readonly blockBytes: number,
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
    pieces: readonly { offset: number; values: Float32Array }[],
  ): void {
    this.expectOpen('appendPieces');
    this.segments.push({ unit, handle, buffer, byteOffset: this.position, numel });
    let cursor = 0;
    // Empty pieces (a parameter with no elements on this rank) say offset 0: skip them.
    const present = pieces.filter((piece) => piece.values.length > 0);
    for (const piece of present.sort((left, right) => left.offset - right.offset)) {
      this.writeZeros(piece.offset - cursor);
      const { values } = piece;
      this.writeBytes(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
      cursor = piece.offset + values.length;
    }
    this.writeZeros(numel - cursor);
  }

  private writeZeros(count: number): void {
    if (count <= 0) return;
    if (this.zeros.length < count) this.zeros = new Float32Array(count);
    const zeros = this.zeros.subarray(0, count);
    this.writeBytes(new Uint8Array(zeros.buffer, zeros.byteOffset, zeros.byteLength));
  }

  private writeBytes(bytes: Uint8Array): void {
    let written = 0;
    while (written < bytes.byteLength) {
      written += writeSync(this.descriptor, bytes, written, bytes.byteLength - written);
    }
    this.fileHash.update(bytes);
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
    return { bytes: this.position, sha256: this.fileHash.digest('hex') };
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
