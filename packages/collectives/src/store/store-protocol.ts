import type { CollectiveErrorCode } from '../errors.js';
import { ByteReader, ByteWriter } from './internal/byte-reader.js';

/**
 * The Store's messages, carried one per sealed frame (see SecureChannel).
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
