import { CollectiveError } from '../../errors.js';

/** Bounds-checked big-endian reads over one frame; every overrun is a 'malformed-frame' error. */
export class ByteReader {
  private offset = 0;

  constructor(
    private readonly bytes: Buffer,
    private readonly what: string,
  ) {}

  u8(): number {
    this.need(1);
    return this.bytes.readUInt8(this.offset++);
  }

  u32(): number {
    this.need(4);
    const value = this.bytes.readUInt32BE(this.offset);
    this.offset += 4;
    return value;
  }

  f64(): number {
    this.need(8);
    const value = this.bytes.readDoubleBE(this.offset);
    this.offset += 8;
    return value;
  }

  /** A u32 length then that many bytes (copied), at most `maxBytes`. */
  bytesField(maxBytes: number): Uint8Array {
    const length = this.u32();
    if (length > maxBytes) this.malformed(`a field of ${length} bytes exceeds the limit of ${maxBytes}`);
    this.need(length);
    const value = new Uint8Array(this.bytes.subarray(this.offset, this.offset + length));
    this.offset += length;
    return value;
  }

  /** A UTF-8 string field; rejects invalid UTF-8. */
  string(maxBytes: number): string {
    const bytes = this.bytesField(maxBytes);
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      return this.malformed('a string field is not valid UTF-8');
    }
  }

  /** Throws unless every byte was consumed. */
  end(): void {
    if (this.offset !== this.bytes.length) {
      this.malformed(`${this.bytes.length - this.offset} trailing bytes after the message`);
    }
  }

  malformed(reason: string): never {
    throw new CollectiveError(`Malformed ${this.what}: ${reason}.`, {
      code: 'malformed-frame',
      fix: 'the peer is not an fsdp-ts process of this version; the connection is closed.',
    });
  }

  private need(count: number): void {
    if (this.offset + count > this.bytes.length) {
      this.malformed(`needed ${count} more bytes at offset ${this.offset} of ${this.bytes.length}`);
    }
  }
}

/** Accumulates big-endian fields into one buffer. */
export class ByteWriter {
  private readonly parts: Buffer[] = [];

  u8(value: number): this {
    this.parts.push(Buffer.of(value));
    return this;
  }

  u32(value: number): this {
    const part = Buffer.alloc(4);
    part.writeUInt32BE(value, 0);
    this.parts.push(part);
    return this;
  }

  f64(value: number): this {
    const part = Buffer.alloc(8);
    part.writeDoubleBE(value, 0);
    this.parts.push(part);
    return this;
  }

  bytesField(value: Uint8Array): this {
    this.u32(value.length);
    this.parts.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
    return this;
  }

  string(value: string): this {
    return this.bytesField(Buffer.from(value, 'utf8'));
  }

  finish(): Buffer {
    return Buffer.concat(this.parts);
  }
}
