import { createCipheriv, createDecipheriv, type DecipherGCM } from 'node:crypto';
import type { SessionKeys } from '../../src/auth/authenticate-socket.js';
import { CollectiveError } from '../../src/errors.js';

const TAG_BYTES = 16;
const NONCE_BYTES = 12;
const HEADER_BYTES = 8;

/** Plaintext bytes per sealed record at most; a longer write becomes several records. */
export const SEALED_RECORD_BYTES = 256 * 1024;

type OpenState = 'header' | 'body' | 'tag' | 'failed';

/**
 * The candidate `secure: true` did not take (bench/secure-transport-probe.ts measures it against
 * node:tls; architecture/decisions/2026-12-01-secure-data-path.md): the byte stream of one data
 * connection sealed in JavaScript with node:crypto AES-256-GCM under the session keys authenticateSocket derived for this connection (one key
 * per direction, fresh per connection). A record is
 *   `length u32 BE | ~length u32 BE | ciphertext[length] | tag[16]`
 * with the 8-byte header as authenticated data and a 64-bit record counter per direction as the
 * nonce, so a nonce never repeats under a key, and an altered, replayed, reordered, dropped or
 * injected record fails its tag. The length is written twice (the second inverted) so a changed
 * header byte is refused at once instead of making the reader wait for bytes that never come.
 *
 * Opening streams: ciphertext is decrypted chunk by chunk as it arrives, but the plaintext is
 * held until the record's tag checks, so no unauthenticated byte ever reaches a reduction or an
 * output buffer. A failure is final ('failed'): the connection must be closed.
 */
export class SealedStream {
  private sendCounter = 0n;
  private receiveCounter = 0n;
  private state: OpenState = 'header';
  private readonly header = Buffer.alloc(HEADER_BYTES);
  private headerFilled = 0;
  private bodyRemaining = 0;
  private readonly tag = Buffer.alloc(TAG_BYTES);
  private tagFilled = 0;
  private decipher: DecipherGCM | undefined;
  private held: Buffer[] = [];

  constructor(
    private readonly keys: SessionKeys,
    private readonly recordBytes = SEALED_RECORD_BYTES,
  ) {}

  /** The wire buffers carrying `plaintext`, in order (headers, ciphertexts and tags). */
  seal(plaintext: Uint8Array): Buffer[] {
    const pieces: Buffer[] = [];
    for (let offset = 0; offset < plaintext.length; offset += this.recordBytes) {
      const part = plaintext.subarray(offset, Math.min(plaintext.length, offset + this.recordBytes));
      const header = Buffer.alloc(HEADER_BYTES);
      header.writeUInt32BE(part.length, 0);
      header.writeUInt32BE(~part.length >>> 0, 4);
      const cipher = createCipheriv('aes-256-gcm', this.keys.sendKey, nonce(this.sendCounter++));
      cipher.setAAD(header);
      pieces.push(header, cipher.update(part));
      cipher.final();
      pieces.push(cipher.getAuthTag());
    }
    return pieces;
  }

  /**
   * Takes received wire bytes; returns the plaintext of every record completed and authenticated
   * by them, in order. Throws a CollectiveError with code `auth` when a record fails.
   */
  open(chunk: Buffer): Buffer[] {
    const opened: Buffer[] = [];
    let offset = 0;
    while (offset < chunk.length) {
      if (this.state === 'failed') throw this.failure('the stream already failed authentication');
      if (this.state === 'header') {
        const take = Math.min(HEADER_BYTES - this.headerFilled, chunk.length - offset);
        chunk.copy(this.header, this.headerFilled, offset, offset + take);
        this.headerFilled += take;
        offset += take;
        if (this.headerFilled === HEADER_BYTES) this.startRecord();
      } else if (this.state === 'body') {
        const take = Math.min(this.bodyRemaining, chunk.length - offset);
        this.held.push(this.decipher!.update(chunk.subarray(offset, offset + take)));
        this.bodyRemaining -= take;
        offset += take;
        if (this.bodyRemaining === 0) this.state = 'tag';
      } else {
        const take = Math.min(TAG_BYTES - this.tagFilled, chunk.length - offset);
        chunk.copy(this.tag, this.tagFilled, offset, offset + take);
        this.tagFilled += take;
        offset += take;
        if (this.tagFilled === TAG_BYTES) opened.push(...this.finishRecord());
      }
    }
    return opened;
  }

  private startRecord(): void {
    const length = this.header.readUInt32BE(0);
    if (~length >>> 0 !== this.header.readUInt32BE(4) || length === 0 || length > this.recordBytes) {
      this.state = 'failed';
      throw this.failure(`a record header announces ${length} bytes and does not check`);
    }
    this.decipher = createDecipheriv('aes-256-gcm', this.keys.receiveKey, nonce(this.receiveCounter++));
    this.decipher.setAAD(this.header);
    this.bodyRemaining = length;
    this.state = 'body';
  }

  private finishRecord(): Buffer[] {
    const decipher = this.decipher!;
    decipher.setAuthTag(this.tag);
    try {
      decipher.final();
    } catch (cause) {
      this.state = 'failed';
      this.held = [];
      throw this.failure('a record failed its authentication tag', cause);
    }
    const opened = this.held;
    this.held = [];
    this.decipher = undefined;
    this.headerFilled = 0;
    this.tagFilled = 0;
    this.state = 'header';
    return opened;
  }

  private failure(what: string, cause?: unknown): CollectiveError {
    return new CollectiveError(
      `Secure transport: ${what}; the bytes were altered, replayed or injected on the way.`,
      {
        code: 'auth',
        cause,
        fix: 'nothing to fix on this side; the connection is closed. Look for a device or process tampering with traffic between the hosts.',
      },
    );
  }
}

function nonce(counter: bigint): Buffer {
  const bytes = Buffer.alloc(NONCE_BYTES);
  bytes.writeBigUInt64BE(counter, NONCE_BYTES - 8);
  return bytes;
}
