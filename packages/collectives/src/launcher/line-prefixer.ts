/** Longest partial line held back waiting for its newline; beyond it the text is emitted as a line. */
const MAX_HELD_BYTES = 1024 * 1024;
const NEWLINE = 0x0a;

/**
 * Prefixes every line of a byte stream (`[rank 1] ...`) and hands whole lines to `write`, one
 * call per received chunk, so lines of different workers interleave but never split.
 * Bytes after the last newline wait for the next chunk (or `flush`), up to 1 MiB.
 */
export class LinePrefixer {
  private held: Buffer = Buffer.alloc(0);
  private readonly prefix: Buffer;

  constructor(
    prefix: string,
    private readonly write: (lines: Buffer) => void,
  ) {
    this.prefix = Buffer.from(prefix, 'utf8');
  }

  push(chunk: Buffer): void {
    const data = this.held.length === 0 ? chunk : Buffer.concat([this.held, chunk]);
    const parts: Buffer[] = [];
    let start = 0;
    for (let end = data.indexOf(NEWLINE); end !== -1; end = data.indexOf(NEWLINE, start)) {
      parts.push(this.prefix, data.subarray(start, end + 1));
      start = end + 1;
    }
    this.held = Buffer.from(data.subarray(start));
    if (this.held.length > MAX_HELD_BYTES) {
      parts.push(this.prefix, this.held, Buffer.of(NEWLINE));
      this.held = Buffer.alloc(0);
    }
    if (parts.length > 0) this.write(Buffer.concat(parts));
  }

  /** Emits a final line without newline, if any. */
  flush(): void {
    if (this.held.length === 0) return;
    this.write(Buffer.concat([this.prefix, this.held, Buffer.of(NEWLINE)]));
    this.held = Buffer.alloc(0);
  }
}
