import { createPrivateKey, createPublicKey, hkdfSync } from 'node:crypto';
import { validateJobSecret } from '../auth/job-secret.js';

/** A CurveZMQ key pair as zeromq takes it: 40-character Z85 strings. */
export interface CurveKeyPair {
  publicKey: string;
  secretKey: string;
}

/** The rendezvous server's key pair and the one every launcher connects with. */
export interface RendezvousKeys {
  server: CurveKeyPair;
  client: CurveKeyPair;
}

const Z85_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#';
/** PKCS#8 DER prefix of a raw 32-byte X25519 private key (RFC 8410). */
const X25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b656e04220420', 'hex');

/** Z85 (ZeroMQ RFC 32) of a byte string whose length is a multiple of 4. */
export function encodeZ85(bytes: Uint8Array): string {
  let text = '';
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let offset = 0; offset < bytes.length; offset += 4) {
    let value = view.getUint32(offset);
    const block: string[] = [];
    for (let digit = 0; digit < 5; digit++) {
      block.unshift(Z85_ALPHABET[value % 85]!);
      value = Math.floor(value / 85);
    }
    text += block.join('');
  }
  return text;
}

function derivePair(secret: string, label: string): CurveKeyPair {
  const secretKey = Buffer.from(hkdfSync('sha256', secret, 'fsdp-ts rendezvous', label, 32));
  const privateKey = createPrivateKey({
    key: Buffer.concat([X25519_PKCS8_PREFIX, secretKey]),
    format: 'der',
    type: 'pkcs8',
  });
  const publicKey = createPublicKey(privateKey).export({ format: 'der', type: 'spki' }).subarray(-32);
  return { publicKey: encodeZ85(publicKey), secretKey: encodeZ85(secretKey) };
}

/**
 * [Note: rendezvous keys] The CURVE key pairs of the elastic rendezvous, derived from the job
 * secret with HKDF-SHA256 (one label per role) and X25519. CurveZMQ never sends the server's
 * long-term public key on the wire: a client must know it to encrypt its HELLO. Since here it is
 * derived from the secret, only launchers holding the secret can complete the handshake; the
 * server sees any other attempt fail (`handshake:error:protocol`) and logs it. Everything after
 * the handshake is encrypted and authenticated by CurveZMQ.
 */
export function deriveRendezvousKeys(secret: string): RendezvousKeys {
  validateJobSecret(secret, 'the rendezvous');
  return { server: derivePair(secret, 'server'), client: derivePair(secret, 'client') };
}
