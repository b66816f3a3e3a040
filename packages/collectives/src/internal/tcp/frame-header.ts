import { CollectiveError } from '../../errors.js';
import type { CollectiveKind } from '../../types.js';
import type { FailureNotice, OpHeader } from '../engine/engine-base.js';
import { DTYPES, OP_KINDS, REDUCE_OPS } from '../op-message.js';

/**
 * [Note: op header] Before any payload, every op puts a 32-byte little-endian header on each
 * connection it uses (collectives: every peer; send: its peer):
 *   0 u32 magic "FSDP" | 4 u8 kind | 5 u8 dtype | 6 u8 wire dtype | 7 u8 reduce op
 *   8 u32 sequence number | 12 i32 root or -1 | 16 f64 element count | 24 i32 peer or -1
 *   28 u32 eager bytes that follow on this connection ([Note: eager first segment])
 * Every header received is compared with this rank's op before data beyond the eager bytes
 * moves: a difference is 'mismatch' on every rank (each skips its peers' eager bytes, so the
 * streams stay aligned); bytes that are not a header are 'malformed-frame'.
 * Notices share the first 8 bytes, with their kind byte and a u32 length at offset 8:
 * abort 255 ([Note: abort]: UTF-8 message follows, the link closes); loss 254 ([Note: blaming a
 * lost peer]: i32 blamed rank at 12, u8 reason at 16, the message, then the header again as a
 * trailer); failure 253 ([Note: failure agreement]: JSON { seq, fingerprint, message }, the link
 * stays open); goodbye 252 ([Note: clean departure]: the collectives completed at 8 and
 * `FSDP-TS-GOODBYE!` at 16, nothing follows).
 */
export const HEADER_BYTES = 32;
const MAGIC = 0x50445346;

const KINDS: readonly (CollectiveKind | 'invalid')[] = ['invalid', ...OP_KINDS];
const WIRES: readonly ('float32' | 'bfloat16')[] = ['float32', 'bfloat16'];
const ABORT_KIND = 255;
const LOSS_KIND = 254;
const FAILURE_KIND = 253;
const GOODBYE_KIND = 252;
const GOODBYE_MARKER = Buffer.from('FSDP-TS-GOODBYE!', 'ascii');

export type { OpHeader };

function noticeFrame(kind: number, text: Buffer, trailer = 0): Buffer {
  const bytes = Buffer.alloc(HEADER_BYTES + text.length + trailer);
  bytes.writeUInt32LE(MAGIC, 0);
  bytes.writeUInt8(kind, 4);
  bytes.writeUInt32LE(text.length, 8);
  text.copy(bytes, HEADER_BYTES);
  return bytes;
}

function noticeView(bytes: Uint8Array, kind: number): Buffer | undefined {
  if (bytes.length < HEADER_BYTES) return undefined;
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, HEADER_BYTES);
  return view.readUInt32LE(0) === MAGIC && view.readUInt8(4) === kind ? view : undefined;
}

export function encodeAbortFrame(message: string): Buffer {
  return noticeFrame(ABORT_KIND, Buffer.from(message, 'utf8'));
}

export function abortMessageLength(bytes: Uint8Array): number | undefined {
  return noticeView(bytes, ABORT_KIND)?.readUInt32LE(8);
}

/** The message of a complete abort notice at the start of `bytes`. */
export function abortMessageIn(bytes: Buffer): string | undefined {
  const length = abortMessageLength(bytes);
  if (length === undefined || bytes.length < HEADER_BYTES + length) return undefined;
  return bytes.toString('utf8', HEADER_BYTES, HEADER_BYTES + length);
}

/** The message of a complete abort or failure notice at the start of a closed connection's unread bytes. */
export function noticeMessageIn(bytes: Buffer, peer: number): string | undefined {
  try {
    return abortMessageIn(bytes) ?? failureNoticeIn(bytes, peer)?.message;
  } catch {
    return undefined;
  }
}

export function encodeFailureNotice(notice: FailureNotice): Buffer {
  return noticeFrame(FAILURE_KIND, Buffer.from(JSON.stringify(notice), 'utf8'));
}

export function failureNoticeLength(bytes: Uint8Array): number | undefined {
  return noticeView(bytes, FAILURE_KIND)?.readUInt32LE(8);
}

export function decodeFailureNotice(json: Buffer, peer: number): FailureNotice {
  try {
    const notice = JSON.parse(json.toString('utf8')) as FailureNotice;
    if (
      typeof notice.seq === 'number' &&
      typeof notice.fingerprint === 'string' &&
      typeof notice.message === 'string'
    )
      return notice;
  } catch {
    // reported below
  }
  throw new CollectiveError(`Malformed failure notice from rank ${peer}.`, {
    code: 'malformed-frame',
    peer,
    fix: 'make sure every rank runs the same version of @fsdp-ts/collectives.',
  });
}

export function failureNoticeIn(bytes: Buffer, peer: number): FailureNotice | undefined {
  const length = failureNoticeLength(bytes);
  if (length === undefined || bytes.length < HEADER_BYTES + length) return undefined;
  return decodeFailureNotice(bytes.subarray(HEADER_BYTES, HEADER_BYTES + length), peer);
}

export type LossReason = 'lost' | 'timeout';
const REASONS: readonly LossReason[] = ['lost', 'timeout'];

export interface LossNotice {
  lost: number;
  message: string;
  reason?: LossReason;
}

export function encodeLossNotice(notice: LossNotice): Buffer {
  const text = Buffer.from(notice.message, 'utf8');
  const bytes = noticeFrame(LOSS_KIND, text, HEADER_BYTES);
  bytes.writeInt32LE(notice.lost, 12);
  bytes.writeUInt8(REASONS.indexOf(notice.reason ?? 'lost'), 16);
  bytes.copy(bytes, HEADER_BYTES + text.length, 0, HEADER_BYTES);
  return bytes;
}

export function lossNoticeHeader(
  bytes: Uint8Array,
): { length: number; lost: number; reason: LossReason } | undefined {
  const view = noticeView(bytes, LOSS_KIND);
  if (view === undefined) return undefined;
  // An unknown reason reads as 'lost': the rank is blamed either way.
  const reason = REASONS[view.readUInt8(16)] ?? 'lost';
  return { length: view.readUInt32LE(8), lost: view.readInt32LE(12), reason };
}

/** A complete loss notice at the start or the end of a closed connection's unread bytes. */
export function lossNoticeIn(bytes: Buffer): LossNotice | undefined {
  const atStart = lossNoticeHeader(bytes);
  const at = (start: number, header: { length: number; lost: number; reason: LossReason }) => ({
    lost: header.lost,
    message: bytes.toString('utf8', start + HEADER_BYTES, start + HEADER_BYTES + header.length),
    reason: header.reason,
  });
  if (atStart !== undefined && bytes.length >= 2 * HEADER_BYTES + atStart.length) return at(0, atStart);
  if (bytes.length < 2 * HEADER_BYTES) return undefined;
  const trailer = bytes.subarray(bytes.length - HEADER_BYTES);
  const atEnd = lossNoticeHeader(trailer);
  if (atEnd === undefined || bytes.length < 2 * HEADER_BYTES + atEnd.length) return undefined;
  const start = bytes.length - 2 * HEADER_BYTES - atEnd.length;
  // The header before the message must repeat the trailer: payload that merely ends like one is no notice.
  return bytes.subarray(start, start + HEADER_BYTES).equals(trailer) ? at(start, atEnd) : undefined;
}

export interface Goodbye {
  collectives: number;
}

export function encodeGoodbye(goodbye: Goodbye): Buffer {
  const bytes = noticeFrame(GOODBYE_KIND, Buffer.alloc(0));
  bytes.writeUInt32LE(goodbye.collectives >>> 0, 8);
  GOODBYE_MARKER.copy(bytes, 16);
  return bytes;
}

export function goodbyeHeader(bytes: Uint8Array): Goodbye | undefined {
  const view = noticeView(bytes, GOODBYE_KIND);
  if (view === undefined || !view.subarray(16, 32).equals(GOODBYE_MARKER)) return undefined;
  return { collectives: view.readUInt32LE(8) };
}

export function isNoticeHeader(bytes: Uint8Array): boolean {
  return (
    abortMessageLength(bytes) !== undefined ||
    lossNoticeHeader(bytes) !== undefined ||
    failureNoticeLength(bytes) !== undefined ||
    goodbyeHeader(bytes) !== undefined
  );
}

export function encodeHeader(header: OpHeader, eagerBytes = 0): Buffer {
  const bytes = Buffer.alloc(HEADER_BYTES);
  bytes.writeUInt32LE(MAGIC, 0);
  bytes.writeUInt8(KINDS.indexOf(header.kind), 4);
  bytes.writeUInt8(DTYPES.indexOf(header.dtype), 5);
  bytes.writeUInt8(WIRES.indexOf(header.wireDtype), 6);
  bytes.writeUInt8(REDUCE_OPS.indexOf(header.reduceOp), 7);
  bytes.writeUInt32LE(header.seq >>> 0, 8);
  bytes.writeInt32LE(header.root, 12);
  bytes.writeDoubleLE(header.count, 16);
  bytes.writeInt32LE(header.peer, 24);
  bytes.writeUInt32LE(eagerBytes, 28);
  return bytes;
}

export function eagerBytesIn(bytes: Uint8Array): number {
  return Buffer.from(bytes.buffer, bytes.byteOffset, HEADER_BYTES).readUInt32LE(28);
}

export const MAX_EAGER_BYTES = 0xffff_ffff;

/** Throws 'malformed-frame' for anything but a header. */
export function decodeHeader(bytes: Uint8Array, peer: number): OpHeader {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const malformed = (what: string): CollectiveError =>
    new CollectiveError(`Malformed op header from rank ${peer}: ${what}.`, {
      code: 'malformed-frame',
      peer,
      fix: 'make sure every rank runs the same version of @fsdp-ts/collectives and nothing else connects to the data ports.',
    });
  if (view.length !== HEADER_BYTES) throw malformed(`${view.length} bytes instead of ${HEADER_BYTES}`);
  if (view.readUInt32LE(0) !== MAGIC) throw malformed(`bad magic 0x${view.readUInt32LE(0).toString(16)}`);
  const kind = KINDS[view.readUInt8(4)];
  const dtype = DTYPES[view.readUInt8(5)];
  const wireDtype = WIRES[view.readUInt8(6)];
  const reduceOp = REDUCE_OPS[view.readUInt8(7)];
  const count = view.readDoubleLE(16);
  if (kind === undefined || kind === 'invalid') throw malformed(`unknown op kind ${view.readUInt8(4)}`);
  if (dtype === undefined) throw malformed(`unknown dtype ${view.readUInt8(5)}`);
  if (wireDtype === undefined) throw malformed(`unknown wire dtype ${view.readUInt8(6)}`);
  if (reduceOp === undefined) throw malformed(`unknown reduction ${view.readUInt8(7)}`);
  if (!Number.isSafeInteger(count) || count < 0) throw malformed(`element count ${count}`);
  const seq = view.readUInt32LE(8);
  return {
    kind,
    dtype,
    wireDtype,
    reduceOp,
    seq,
    root: view.readInt32LE(12),
    peer: view.readInt32LE(24),
    count,
  };
}
