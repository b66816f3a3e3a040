import { CollectiveError } from '../../errors.js';

/**
 * Splits a byte stream into length-prefixed frames (`length u32 BE | body[length]`).
 *
 * State machine: 'reading' until a malformed length arrives, then 'failed' for good (a stream
 * whose framing is lost cannot be resynchronised; the connection must be closed).
 * [Note: frame limits] A length above `maxFrameBytes` or below `minFrameBytes` is rejected as
 * soon as its 4 bytes arrive, before any body is buffered, so a hostile peer cannot make the
 * decoder allocate more than one maximal frame.
 */
export class FrameDecoder {
  private state: 'reading' | 'failed' = 'reading';
  private chunks: Buffer[] = [];
  private buffered = 0;

  constructor(
    private readonly maxFrameBytes: number,
    private readonly minFrameBytes = 0,
  ) {}

  /** Appends received bytes and returns the frame bodies now complete, in order. */
  push(chunk: Uint8Array): Buffer[] {
    if (this.state === 'failed') {
      throw new CollectiveError('The frame decoder already failed; the stream cannot be read further.', {
        code: 'malformed-frame',
        fix: 'close the connection after the first malformed frame.',
      });
    }
    this.chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.buffered += chunk.byteLength;
    const frames: Buffer[] = [];
    while (this.buffered >= 4) {
      const head = this.peekHeader();
      const length = head.readUInt32BE(0);
      if (length > this.maxFrameBytes || length < this.minFrameBytes) this.fail(length);
      if (this.buffered < 4 + length) break;
      const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.buffered);
      frames.push(Buffer.from(all.subarray(4, 4 + length)));
      const rest = all.subarray(4 + length);
      this.chunks = rest.length > 0 ? [rest] : [];
      this.buffered = rest.length;
    }
    return frames;
  }

  /** Bytes received that do not yet form a whole frame. */
  get pendingBytes(): number {
    return this.buffered;
  }

  private peekHeader(): Buffer {
    const first = this.chunks[0]!;
    if (first.length >= 4) return first;
    const merged = Buffer.concat(this.chunks, this.buffered);
    this.chunks = [merged];
    return merged;
  }

  private fail(length: number): never {
    this.state = 'failed';
    this.chunks = [];
    this.buffered = 0;
    throw new CollectiveError(
      `A frame announces ${length} bytes; expected between ${this.minFrameBytes} and ${this.maxFrameBytes}.`,
      {
        code: 'malformed-frame',
        expected: `${this.minFrameBytes}..${this.maxFrameBytes}`,
        actual: length,
        fix: 'the peer is not an fsdp-ts process of this version, or the stream is corrupt; the connection is closed.',
      },
    );
  }
}

/** The wire bytes of one frame carrying `body`. */
export function frame(body: Uint8Array): Buffer {
  const header = Buffer.alloc(4);
  header.writeUInt32BE(body.length, 0);
  return Buffer.concat([header, body]);
}
