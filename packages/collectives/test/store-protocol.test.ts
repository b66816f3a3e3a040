import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CollectiveError } from '../src/errors.js';
import {
  decodeStoreRequest,
  decodeStoreResponse,
  encodeStoreRequest,
  encodeStoreResponse,
  FrameDecoder,
  type StoreRequest,
} from '../src/store/store-protocol.js';

const key = fc.string({ maxLength: 20 });
const value = fc.uint8Array({ maxLength: 64 });
const id = fc.integer({ min: 0, max: 2 ** 32 - 1 });
const timeoutMs = fc.integer({ min: 0, max: 2 ** 32 - 1 });
const request: fc.Arbitrary<StoreRequest> = fc.oneof(
  fc.record({ op: fc.constant('set' as const), id, key, value }),
  fc.record({ op: fc.constant('get' as const), id, key, timeoutMs }),
  fc.record({ op: fc.constant('add' as const), id, key, delta: fc.integer() }),
  fc.record({ op: fc.constant('compareSet' as const), id, key, expected: value, desired: value }),
  fc.record({ op: fc.constant('wait' as const), id, keys: fc.array(key, { maxLength: 5 }), timeoutMs }),
  fc.record({ op: fc.constant('check' as const), id, keys: fc.array(key, { maxLength: 5 }) }),
  fc.record({ op: fc.constant('delete' as const), id, key }),
  fc.record({ op: fc.constant('setOnDisconnect' as const), id, key, value }),
  fc.record({ op: fc.constant('clearOnDisconnect' as const), id, key }),
);

/** Runs `decode`; it must either succeed or throw a 'malformed-frame' CollectiveError. */
function decodesOrRejects(decode: () => unknown): 'decoded' | 'rejected' {
  try {
    decode();
    return 'decoded';
  } catch (error) {
    expect(error).toBeInstanceOf(CollectiveError);
    expect((error as CollectiveError).code).toBe('malformed-frame');
    return 'rejected';
  }
}

describe('store protocol', () => {
  it('round-trips every request', () => {
    fc.assert(
      fc.property(request, (original) => {
        const decoded = decodeStoreRequest(encodeStoreRequest(original));
        expect(decoded).toEqual(original);
      }),
    );
  });

  it('round-trips responses', () => {
    const ok = { status: 'ok' as const, id: 7, value: Uint8Array.of(1, 2, 3) };
    expect(decodeStoreResponse(encodeStoreResponse(ok))).toEqual(ok);
    const error = { status: 'error' as const, id: 9, code: 'timeout' as const, message: 'waited' };
    expect(decodeStoreResponse(encodeStoreResponse(error))).toEqual(error);
  });

  it('rejects every truncation of a valid request', () => {
    fc.assert(
      fc.property(request, fc.nat(), (original, cut) => {
        const bytes = encodeStoreRequest(original);
        const truncated = bytes.subarray(0, cut % bytes.length);
        expect(decodesOrRejects(() => decodeStoreRequest(truncated))).toBe('rejected');
      }),
    );
  });

  it('rejects trailing bytes', () => {
    const bytes = encodeStoreRequest({ op: 'delete', id: 1, key: 'k' });
    expect(decodesOrRejects(() => decodeStoreRequest(Buffer.concat([bytes, Buffer.of(0)])))).toBe('rejected');
  });

  it('never throws anything but a malformed-frame error on random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        decodesOrRejects(() => decodeStoreRequest(Buffer.from(bytes)));
        decodesOrRejects(() => decodeStoreResponse(Buffer.from(bytes)));
      }),
      { numRuns: 2000 },
    );
  });

  it('rejects huge announced lengths inside a frame without allocating them', () => {
    const bytes = Buffer.from([0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xf0]);
    expect(decodesOrRejects(() => decodeStoreRequest(bytes))).toBe('rejected');
  });
});

function frame(body: Uint8Array): Buffer {
  const header = Buffer.alloc(4);
  header.writeUInt32BE(body.length, 0);
  return Buffer.concat([header, body]);
}

describe('FrameDecoder', () => {
  it('reassembles frames however the stream is split', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 50 }), { maxLength: 8 }),
        fc.array(fc.integer({ min: 1, max: 20 }), { minLength: 1, maxLength: 30 }),
        (bodies, cuts) => {
          const stream = Buffer.concat(bodies.map(frame));
          const decoder = new FrameDecoder(1024);
          const received: Buffer[] = [];
          let offset = 0;
          for (let index = 0; offset < stream.length; index++) {
            const size = cuts[index % cuts.length]!;
            received.push(...decoder.push(stream.subarray(offset, offset + size)));
            offset += size;
          }
          expect(received.map((body) => [...body])).toEqual(bodies.map((body) => [...body]));
          expect(decoder.pendingBytes).toBe(0);
        },
      ),
    );
  });

  it('rejects an oversized or undersized length at once and stays failed', () => {
    const decoder = new FrameDecoder(100, 16);
    expect(() => decoder.push(Buffer.from([0, 0, 0, 101]))).toThrow(/announces 101 bytes/);
    expect(() => decoder.push(frame(new Uint8Array(20)))).toThrow(/already failed/);
    expect(() => new FrameDecoder(100, 16).push(frame(new Uint8Array(3)))).toThrow(/announces 3 bytes/);
  });

  it('fails only with malformed-frame errors on random streams', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 10 }), (chunks) => {
        const decoder = new FrameDecoder(4096, 16);
        for (const chunk of chunks) {
          if (decodesOrRejects(() => decoder.push(chunk)) === 'rejected') return;
        }
      }),
    );
  });
});
