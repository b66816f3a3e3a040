import { createCipheriv, createDecipheriv } from 'node:crypto';
import { CollectiveError } from '../errors.js';
import type { SessionKeys } from './authenticate-socket.js';

const TAG_BYTES = 16;
const NONCE_BYTES = 12;

/**
 * AES-256-GCM sealing of the frames of one authenticated connection, with the session keys of
 * `authenticateSocket`. A sealed frame is `length u32 BE | ciphertext | tag[16]`, where length
 * counts ciphertext and tag and is also the authenticated data.
 *
 * [Note: frame nonces] Each direction has its own key and a 64-bit counter as nonce, bumped per
 * frame, so a nonce never repeats under a key and a replayed, reordered, dropped or injected
 * frame fails authentication instead of being accepted.
 */
export class SecureChannel {
  /** Bytes a sealed frame adds to its plaintext (length prefix and tag). */
  static readonly OVERHEAD_BYTES = 4 + TAG_BYTES;
  private sendCounter = 0n;
  private receiveCounter = 0n;

  constructor(private readonly keys: SessionKeys) {}

  /** The wire bytes of one frame carrying `plaintext`. */
  seal(plaintext: Uint8Array): Buffer {
    const header = Buffer.alloc(4);
    header.writeUInt32BE(plaintext.length + TAG_BYTES, 0);
    const cipher = createCipheriv('aes-256-gcm', this.keys.sendKey, nonce(this.sendCounter++));
    cipher.setAAD(header);
    const body = cipher.update(plaintext);
    cipher.final();
    return Buffer.concat([header, body, cipher.getAuthTag()]);
  }

  /**
   * The plaintext of one received frame body (what follows its 4-byte length prefix). Throws a
   * CollectiveError (code 'auth') when the frame was not sealed by the peer in this order.
   */
  open(body: Uint8Array): Buffer {
    if (body.length < TAG_BYTES) {
      throw new CollectiveError(`A sealed frame has ${body.length} bytes; expected at least ${TAG_BYTES}.`, {
        code: 'malformed-frame',
        expected: `>= ${TAG_BYTES}`,
        actual: body.length,
      });
    }
    const header = Buffer.alloc(4);
    header.writeUInt32BE(body.length, 0);
    const decipher = createDecipheriv('aes-256-gcm', this.keys.receiveKey, nonce(this.receiveCounter++));
    decipher.setAAD(header);
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    const plaintext = decipher.update(body.subarray(0, body.length - TAG_BYTES));
    try {
      decipher.final();
    } catch (cause) {
      throw new CollectiveError('A frame failed authentication: it was altered, replayed or injected.', {
        code: 'auth',
        cause,
        fix: 'nothing to fix on this side; the connection is closed. Look for a process tampering with traffic.',
      });
    }
    return plaintext;
  }
}

function nonce(counter: bigint): Buffer {
  const bytes = Buffer.alloc(NONCE_BYTES);
  bytes.writeBigUInt64BE(counter, NONCE_BYTES - 8);
  return bytes;
}
