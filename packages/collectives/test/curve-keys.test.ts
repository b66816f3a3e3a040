import { describe, expect, it } from 'vitest';
import { deriveRendezvousKeys, encodeZ85 } from '../src/elastic/curve-keys.js';

describe('rendezvous CURVE keys', () => {
  it('Z85 encodes the ZeroMQ RFC 32 test vector', () => {
    expect(encodeZ85(Uint8Array.from([0x86, 0x4f, 0xd2, 0x6f, 0xb5, 0x59, 0xf7, 0x5b]))).toBe('HelloWorld');
  });

  it('derives the same 40-character keys from the same secret, different ones from another', () => {
    const keys = deriveRendezvousKeys('job-secret-0123456789abcdef');
    expect(deriveRendezvousKeys('job-secret-0123456789abcdef')).toEqual(keys);
    expect(keys.server.publicKey).toHaveLength(40);
    expect(keys.server.publicKey).not.toBe(keys.client.publicKey);
    expect(deriveRendezvousKeys('job-secret-0123456789abcdeF').server.publicKey).not.toBe(
      keys.server.publicKey,
    );
  });

  it('refuses a short secret with a typed error', () => {
    expect(() => deriveRendezvousKeys('short')).toThrow(/at least 16/);
  });
});
