import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CollectiveError } from '../src/index.js';
import {
  abortMessageLength,
  decodeFailureNotice,
  decodeHeader,
  eagerBytesIn,
  encodeFailureNotice,
  encodeHeader,
  encodeLossNotice,
  failureNoticeIn,
  failureNoticeLength,
  HEADER_BYTES,
  lossNoticeHeader,
  lossNoticeIn,
  MAX_EAGER_BYTES,
  type OpHeader,
} from '../src/internal/tcp/frame-header.js';

const header = fc.record<OpHeader>({
  kind: fc.constantFrom('allReduce', 'allGather', 'reduceScatter', 'broadcast', 'barrier', 'send', 'recv'),
  dtype: fc.constantFrom('float32', 'int32', 'bfloat16'),
  wireDtype: fc.constantFrom('float32', 'bfloat16'),
  reduceOp: fc.constantFrom('sum', 'avg', 'max', 'min'),
  seq: fc.nat({ max: 0xffffffff }),
  root: fc.integer({ min: -1, max: 1 << 20 }),
  peer: fc.integer({ min: -1, max: 1 << 20 }),
  count: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
});

function decodeOrMalformed(bytes: Uint8Array): OpHeader | 'malformed' {
  try {
    return decodeHeader(bytes, 3);
  } catch (error) {
    expect(error).toBeInstanceOf(CollectiveError);
    expect((error as CollectiveError).code).toBe('malformed-frame');
    expect((error as CollectiveError).peer).toBe(3);
    return 'malformed';
  }
}

describe('op header decoding', () => {
  it('round-trips every valid header', () => {
    fc.assert(
      fc.property(header, (value) => {
        expect(decodeHeader(encodeHeader(value), 0)).toEqual(value);
      }),
    );
  });

  it('carries the eager byte count beside the header without changing it', () => {
    fc.assert(
      fc.property(header, fc.nat({ max: MAX_EAGER_BYTES }), (value, eager) => {
        const bytes = encodeHeader(value, eager);
        expect(decodeHeader(bytes, 0)).toEqual(value);
        expect(eagerBytesIn(bytes)).toBe(eager);
      }),
    );
    expect(eagerBytesIn(encodeHeader({ ...fc.sample(header, 1)[0]! }))).toBe(0);
  });

  it('rejects random and truncated frames with malformed-frame, never another error', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 64 }), (bytes) => {
        const result = decodeOrMalformed(bytes);
        if (bytes.length !== HEADER_BYTES) expect(result).toBe('malformed');
      }),
    );
    fc.assert(
      fc.property(header, fc.nat({ max: HEADER_BYTES - 1 }), (value, cut) => {
        expect(decodeOrMalformed(encodeHeader(value).subarray(0, cut))).toBe('malformed');
      }),
    );
  });

  it('rejects a valid header with one corrupted byte in its magic or enums', () => {
    fc.assert(
      fc.property(
        header,
        fc.integer({ min: 0, max: 7 }),
        fc.integer({ min: 1, max: 255 }),
        (value, index, delta) => {
          const bytes = encodeHeader(value);
          bytes[index] = (bytes[index]! + delta) & 0xff;
          const result = decodeOrMalformed(bytes);
          if (index < 4) expect(result).toBe('malformed');
          else if (result !== 'malformed') expect(result).not.toEqual(value);
        },
      ),
    );
  });
});

describe('loss notice ([Note: blaming a lost peer])', () => {
  const notice = fc.record({
    lost: fc.integer({ min: 0, max: 1 << 20 }),
    message: fc.string(),
    reason: fc.constantFrom('lost' as const, 'timeout' as const),
  });

  it('is found where a header is expected and at the end of any bytes a closed connection left', () => {
    fc.assert(
      fc.property(notice, fc.uint8Array({ maxLength: 300 }), (value, before) => {
        const frame = encodeLossNotice(value);
        expect(lossNoticeIn(frame)).toEqual(value);
        expect(lossNoticeIn(Buffer.concat([Buffer.from(before), frame]))).toEqual(value);
      }),
    );
  });

  it("reads a notice without a reason byte as 'lost' (the blamed rank is the same either way)", () => {
    const frame = encodeLossNotice({ lost: 2, message: 'gone', reason: 'timeout' });
    expect(lossNoticeIn(frame)?.reason).toBe('timeout');
    frame.writeUInt8(0, 16);
    frame.writeUInt8(0, frame.length - HEADER_BYTES + 16);
    expect(lossNoticeIn(frame)).toEqual({ lost: 2, message: 'gone', reason: 'lost' });
    frame.writeUInt8(9, 16);
    expect(lossNoticeHeader(frame)?.reason).toBe('lost');
  });

  it('is not found when bytes follow it, when it is cut short, or in payload that ends like its trailer', () => {
    const frame = encodeLossNotice({ lost: 1, message: 'rank 1 closed the connection' });
    expect(lossNoticeIn(Buffer.concat([Buffer.alloc(7), frame, Buffer.alloc(5)]))).toBeUndefined();
    expect(lossNoticeIn(frame.subarray(1))).toBeUndefined();
    expect(lossNoticeIn(frame.subarray(0, frame.length - 1))).toBeUndefined();
    const trailerOnly = Buffer.concat([Buffer.alloc(200, 7), frame.subarray(frame.length - HEADER_BYTES)]);
    expect(lossNoticeIn(trailerOnly)).toBeUndefined();
    // Never mistaken for an op header.
    expect(decodeOrMalformed(frame.subarray(0, HEADER_BYTES))).toBe('malformed');
  });
});

describe('failure notice ([Note: failure agreement])', () => {
  const notice = fc.record({
    seq: fc.nat({ max: 0xffffffff }),
    fingerprint: fc.string(),
    message: fc.string({ unit: 'grapheme' }),
  });

  it('round-trips, is told apart from headers, abort and loss notices, and is not read when cut short', () => {
    fc.assert(
      fc.property(notice, (original) => {
        const bytes = encodeFailureNotice(original);
        const length = failureNoticeLength(bytes.subarray(0, HEADER_BYTES));
        expect(length).toBe(bytes.length - HEADER_BYTES);
        expect(decodeFailureNotice(bytes.subarray(HEADER_BYTES), 1)).toEqual(original);
        expect(failureNoticeIn(bytes, 1)).toEqual(original);
        expect(failureNoticeIn(bytes.subarray(0, bytes.length - 1), 1)).toBeUndefined();
        expect(abortMessageLength(bytes)).toBeUndefined();
        expect(lossNoticeHeader(bytes)).toBeUndefined();
        expect(decodeOrMalformed(bytes.subarray(0, HEADER_BYTES))).toBe('malformed');
      }),
    );
  });

  it('rejects a body that is not a notice with malformed-frame', () => {
    for (const body of ['not json', '{"seq":1}', '[]']) {
      let thrown: unknown;
      try {
        decodeFailureNotice(Buffer.from(body), 2);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(CollectiveError);
      expect((thrown as CollectiveError).code).toBe('malformed-frame');
      expect((thrown as CollectiveError).peer).toBe(2);
    }
  });

  it('is never mistaken for a header: every encoded header reads as no notice', () => {
    fc.assert(fc.property(header, (valid) => failureNoticeLength(encodeHeader(valid)) === undefined));
  });
});
