import { CollectiveError, type CollectiveErrorCode } from '../errors.js';

/**
 * The Store's messages, carried one per length-prefixed frame inside the TLS-PSK link ([Note: store link]).
 *
 * [Note: store wire format] request = op u8 | id u32 | fields; response = status u8 (0 ok,
 * 1 error) | id u32 | (ok) value bytes | (error) code string, message string. Strings and byte
 * fields are `length u32 | bytes`; numbers are big-endian. The decoders check every length
 * against the frame and the limits below, and reject unknown ops and trailing bytes.
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

export type StoreOp = StoreRequest['op'];

export type StoreResponse =
  | { status: 'ok'; id: number; value: Uint8Array }
  | { status: 'error'; id: number; code: CollectiveErrorCode; message: string };

const OPS: readonly StoreOp[] = [
  'set',
  'get',
  'add',
  'compareSet',
  'wait',
  'check',
  'delete',
  'setOnDisconnect',
  'clearOnDisconnect',
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
  const writer = new ByteWriter().u8(OPS.indexOf(request.op)).u32(request.id);
  switch (request.op) {
    case 'set':
    case 'setOnDisconnect':
      return writer.string(request.key).bytesField(request.value).finish();
    case 'get':
      return writer.string(request.key).u32(request.timeoutMs).finish();
    case 'add':
      return writer.string(request.key).f64(request.delta).finish();
    case 'compareSet':
      return writer.string(request.key).bytesField(request.expected).bytesField(request.desired).finish();
    case 'wait':
    case 'check':
      writer.u32(request.keys.length);
      for (const key of request.keys) writer.string(key);
      if (request.op === 'wait') writer.u32(request.timeoutMs);
      return writer.finish();
    case 'delete':
    case 'clearOnDisconnect':
      return writer.string(request.key).finish();
  }
}

/** Decodes one request frame; throws a CollectiveError (code 'malformed-frame') on any defect. */
export function decodeStoreRequest(frame: Buffer): StoreRequest {
  const reader: ByteReader = new ByteReader(frame, 'store request');
  const opIndex = reader.u8();
  const op = OPS[opIndex];
  if (op === undefined) reader.malformed(`unknown op ${opIndex}`);
  const id = reader.u32();
  const key = () => reader.string(STORE_LIMITS.maxKeyBytes);
  const value = () => reader.bytesField(STORE_LIMITS.maxValueBytes);
  const keys = () => {
    const count = reader.u32();
    if (count > STORE_LIMITS.maxWaitKeys)
      reader.malformed(`${count} keys exceed ${STORE_LIMITS.maxWaitKeys}`);
    const result: string[] = [];
    for (let index = 0; index < count; index++) result.push(key());
    return result;
  };
  let request: StoreRequest;
  switch (op) {
    case 'set':
    case 'setOnDisconnect':
      request = { op, id, key: key(), value: value() };
      break;
    case 'get':
      request = { op, id, key: key(), timeoutMs: reader.u32() };
      break;
    case 'add': {
      const addKey = key();
      const delta = reader.f64();
      if (!Number.isSafeInteger(delta)) reader.malformed(`add delta ${delta} is not a safe integer`);
      request = { op, id, key: addKey, delta };
      break;
    }
    case 'compareSet':
      request = { op, id, key: key(), expected: value(), desired: value() };
      break;
    case 'wait':
      request = { op, id, keys: keys(), timeoutMs: reader.u32() };
      break;
    case 'check':
      request = { op, id, keys: keys() };
      break;
    case 'delete':
    case 'clearOnDisconnect':
      request = { op, id, key: key() };
      break;
  }
  reader.end();
  return request;
}

export function encodeStoreResponse(response: StoreResponse): Buffer {
  const writer = new ByteWriter().u8(response.status === 'ok' ? 0 : 1).u32(response.id);
  if (response.status === 'ok') return writer.bytesField(response.value).finish();
  return writer.string(response.code).string(response.message).finish();
}

/** Decodes one response frame; throws a CollectiveError (code 'malformed-frame') on any defect. */
export function decodeStoreResponse(frame: Buffer): StoreResponse {
  const reader: ByteReader = new ByteReader(frame, 'store response');
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
    reader.malformed(`unknown response status ${status}`);
  }
  reader.end();
  return response;
}

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
