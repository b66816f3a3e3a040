import { CollectiveError, type CollectiveErrorCode } from '../errors.js';

/**
 * The Store's messages, carried one per length-prefixed frame inside the TLS-PSK link ([Note: store link]).
 *
 * [Note: store wire format] request = op u8 | id u32 | the op's fields (REQUEST_FIELDS, in order);
 * response = status u8 (0 ok, 1 error) | id u32 | (ok) value bytes | (error) code string, message
 * string. Strings and byte fields are `length u32 | bytes`, a key list is `count u32 | strings`;
 * numbers are big-endian. The decoders check every length against the frame and the limits
 * below, and reject unknown ops and trailing bytes.
 */
export const STORE_LIMITS = {
  maxKeyBytes: 4096,
  maxValueBytes: 8 * 1024 * 1024,
  maxWaitKeys: 65_536,
  /** Largest frame body: a maximal value plus a key and headers. */
  maxFrameBytes: 8 * 1024 * 1024 + 64 * 1024,
} as const;

export type StoreRequest =
  | { op: 'set'; id: number; key: string; value: Uint8Array }
  | { op: 'get'; id: number; key: string; timeoutMs: number }
  | { op: 'add'; id: number; key: string; delta: number }
  | { op: 'compareSet'; id: number; key: string; expected: Uint8Array; desired: Uint8Array }
  | { op: 'wait'; id: number; keys: string[]; timeoutMs: number }
  | { op: 'check'; id: number; keys: string[] }
  | { op: 'delete'; id: number; key: string }
  | { op: 'setOnDisconnect'; id: number; key: string; value: Uint8Array }
  | { op: 'clearOnDisconnect'; id: number; key: string };

export type StoreResponse =
  | { status: 'ok'; id: number; value: Uint8Array }
  | { status: 'error'; id: number; code: CollectiveErrorCode; message: string };

type Field = 'key' | 'keys' | 'value' | 'expected' | 'desired' | 'timeoutMs' | 'delta';

/** Each op's fields in wire order; the op's number is its index. */
const REQUEST_FIELDS: readonly [StoreRequest['op'], readonly Field[]][] = [
  ['set', ['key', 'value']],
  ['get', ['key', 'timeoutMs']],
  ['add', ['key', 'delta']],
  ['compareSet', ['key', 'expected', 'desired']],
  ['wait', ['keys', 'timeoutMs']],
  ['check', ['keys']],
  ['delete', ['key']],
  ['setOnDisconnect', ['key', 'value']],
  ['clearOnDisconnect', ['key']],
];

const ERROR_CODES: readonly CollectiveErrorCode[] = [
  'timeout',
  'peer-lost',
  'mismatch',
  'invalid-argument',
  'closed',
  'auth',
  'malformed-frame',
  'store',
  'launch',
];

export function encodeStoreRequest(request: StoreRequest): Buffer {
  const opIndex = REQUEST_FIELDS.findIndex(([op]) => op === request.op);
  const parts: Buffer[] = [u8(opIndex), u32(request.id)];
  const fields = request as unknown as Record<Field, never>;
  for (const field of REQUEST_FIELDS[opIndex]![1]) {
    if (field === 'key') parts.push(...bytesField(Buffer.from(fields.key as string)));
    else if (field === 'keys') {
      const keys = fields.keys as string[];
      parts.push(u32(keys.length), ...keys.flatMap((key) => bytesField(Buffer.from(key))));
    } else if (field === 'timeoutMs') parts.push(u32(fields.timeoutMs));
    else if (field === 'delta') parts.push(f64(fields.delta));
    else parts.push(...bytesField(fields[field] as Uint8Array));
  }
  return Buffer.concat(parts);
}

/** Decodes one request frame; throws a CollectiveError (code 'malformed-frame') on any defect. */
export function decodeStoreRequest(frame: Buffer): StoreRequest {
  const reader = new ByteReader(frame, 'store request');
  const opIndex = reader.u8();
  const entry = REQUEST_FIELDS[opIndex];
  if (entry === undefined) return reader.malformed(`unknown op ${opIndex}`);
  const request: Record<string, unknown> = { op: entry[0], id: reader.u32() };
  for (const field of entry[1]) {
    if (field === 'key') request.key = reader.string(STORE_LIMITS.maxKeyBytes);
    else if (field === 'keys') {
      const count = reader.u32();
      if (count > STORE_LIMITS.maxWaitKeys)
        reader.malformed(`${count} keys exceed ${STORE_LIMITS.maxWaitKeys}`);
      request.keys = Array.from({ length: count }, () => reader.string(STORE_LIMITS.maxKeyBytes));
    } else if (field === 'timeoutMs') request.timeoutMs = reader.u32();
    else if (field === 'delta') {
      const delta = reader.f64();
      if (!Number.isSafeInteger(delta)) reader.malformed(`add delta ${delta} is not a safe integer`);
      request.delta = delta;
    } else request[field] = reader.bytesField(STORE_LIMITS.maxValueBytes);
  }
  reader.end();
  return request as StoreRequest;
}

export function encodeStoreResponse(response: StoreResponse): Buffer {
  const head = [u8(response.status === 'ok' ? 0 : 1), u32(response.id)];
  if (response.status === 'ok') return Buffer.concat([...head, ...bytesField(response.value)]);
  const [code, message] = [Buffer.from(response.code), Buffer.from(response.message)];
  return Buffer.concat([...head, ...bytesField(code), ...bytesField(message)]);
}

/** Decodes one response frame; throws a CollectiveError (code 'malformed-frame') on any defect. */
export function decodeStoreResponse(frame: Buffer): StoreResponse {
  const reader = new ByteReader(frame, 'store response');
  const status = reader.u8();
  const id = reader.u32();
  let response: StoreResponse;
  if (status === 0) {
    response = { status: 'ok', id, value: reader.bytesField(STORE_LIMITS.maxFrameBytes) };
  } else if (status === 1) {
    const code = reader.string(64);
    if (!(ERROR_CODES as readonly string[]).includes(code)) reader.malformed(`unknown error code '${code}'`);
    response = { status: 'error', id, code: code as CollectiveErrorCode, message: reader.string(64 * 1024) };
  } else {
    return reader.malformed(`unknown response status ${status}`);
  }
  reader.end();
  return response;
}

const u8 = (value: number) => Buffer.of(value);
const u32 = (value: number) => {
  const part = Buffer.alloc(4);
  part.writeUInt32BE(value, 0);
  return part;
};
const f64 = (value: number) => {
  const part = Buffer.alloc(8);
  part.writeDoubleBE(value, 0);
  return part;
};
const bytesField = (value: Uint8Array): Buffer[] => [
  u32(value.length),
  Buffer.from(value.buffer, value.byteOffset, value.byteLength),
];

/** Bounds-checked big-endian reads over one frame; every overrun is a 'malformed-frame' error. */
class ByteReader {
  private offset = 0;

  constructor(
    private readonly bytes: Buffer,
    private readonly what: string,
  ) {}

  u8(): number {
    return this.take(1).readUInt8(0);
  }

  u32(): number {
    return this.take(4).readUInt32BE(0);
  }

  f64(): number {
    return this.take(8).readDoubleBE(0);
  }

  /** A u32 length then that many bytes (copied), at most `maxBytes`. */
  bytesField(maxBytes: number): Uint8Array {
    const length = this.u32();
    if (length > maxBytes) this.malformed(`a field of ${length} bytes exceeds the limit of ${maxBytes}`);
    return new Uint8Array(this.take(length));
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

  private take(count: number): Buffer {
    if (this.offset + count > this.bytes.length) {
      this.malformed(`needed ${count} more bytes at offset ${this.offset} of ${this.bytes.length}`);
    }
    this.offset += count;
    return this.bytes.subarray(this.offset - count, this.offset);
  }
}

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
  /** Received bytes not yet returned, concatenated only once a whole frame is in. */
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
      if (this.chunks[0]!.length < 4) this.chunks = [Buffer.concat(this.chunks, this.buffered)];
      const length = this.chunks[0]!.readUInt32BE(0);
      if (length > this.maxFrameBytes || length < this.minFrameBytes) this.fail(length);
      if (this.buffered < 4 + length) break;
      const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.buffered);
      frames.push(Buffer.from(all.subarray(4, 4 + length)));
      this.chunks = all.length > 4 + length ? [all.subarray(4 + length)] : [];
      this.buffered = all.length - 4 - length;
    }
    return frames;
  }

  /** Bytes received that do not yet form a whole frame. */
  get pendingBytes(): number {
    return this.buffered;
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
  return Buffer.concat([u32(body.length), body]);
}
