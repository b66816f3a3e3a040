import type { CollectiveBuffer, CollectiveDtype } from '../../types.js';
import type { OpHeader } from '../engine/engine-base.js';
import { DTYPES, OP_KINDS, type OpMessage, REDUCE_OPS } from '../op-message.js';

function elementBytes(dtype: CollectiveDtype): number {
  return dtype === 'bfloat16' ? 2 : 4;
}

/** A function of the header, so ranks that agree on it agree on the path. */
function contributionElements(header: OpHeader, size: number): number {
  if (header.kind === 'reduceScatter') return header.count * size;
  if (header.kind === 'barrier') return 0;
  return header.count;
}

export function travelsInline(header: OpHeader, size: number): boolean {
  return contributionElements(header, size) * elementBytes(header.dtype) <= INLINE_BYTES;
}

export function writeMailbox(
  control: Int32Array,
  rank: number,
  size: number,
  header: OpHeader,
  op: OpMessage,
): void {
  const slot = mailboxSlot(rank, size, header.seq);
  if (travelsInline(header, size)) {
    const source =
      header.kind === 'allGather' || header.kind === 'reduceScatter'
        ? op.input
        : header.kind === 'broadcast' && header.root !== rank
          ? null
          : op.output;
    if (source !== null && source.length > 0) contribution(control, slot, header, size).set(source as never);
  }
  control[slot] = header.seq;
  control[slot + 1] = OP_KINDS.indexOf(header.kind);
  control[slot + 2] = DTYPES.indexOf(header.dtype);
  control[slot + 3] = REDUCE_OPS.indexOf(header.reduceOp);
  control[slot + 4] = header.root;
  control[slot + 5] = header.peer;
  control[slot + 6] = header.count;
}

/** The kind word of a mailbox that holds a failure notice instead of a header ([Note: failure agreement]). */
const NOTICE_KIND = 100;

/** The notice itself goes over the ports. */
export function writeNoticeMailbox(control: Int32Array, rank: number, size: number, seq: number): void {
  const slot = mailboxSlot(rank, size, seq);
  control[slot] = seq;
  control[slot + 1] = NOTICE_KIND;
}

export function postedNotice(control: Int32Array, rank: number, size: number, seq: number): boolean {
  return control[mailboxSlot(rank, size, seq) + 1] === NOTICE_KIND;
}

export function readHeader(control: Int32Array, rank: number, size: number, seq: number): OpHeader {
  const slot = mailboxSlot(rank, size, seq);
  return {
    seq: control[slot]!,
    kind: OP_KINDS[control[slot + 1]!] ?? 'barrier',
    dtype: DTYPES[control[slot + 2]!] ?? 'float32',
    wireDtype: 'float32',
    reduceOp: REDUCE_OPS[control[slot + 3]!] ?? 'sum',
    root: control[slot + 4]!,
    peer: control[slot + 5]!,
    count: control[slot + 6]!,
  };
}

export function readContribution(
  control: Int32Array,
  rank: number,
  size: number,
  header: OpHeader,
): CollectiveBuffer {
  return contribution(control, mailboxSlot(rank, size, header.seq), header, size);
}

function contribution(control: Int32Array, slot: number, header: OpHeader, size: number): CollectiveBuffer {
  const byteOffset = control.byteOffset + (slot + MAILBOX_HEADER_WORDS) * 4;
  const length = contributionElements(header, size);
  if (header.dtype === 'float32') return new Float32Array(control.buffer, byteOffset, length);
  if (header.dtype === 'int32') return new Int32Array(control.buffer, byteOffset, length);
  return new Uint16Array(control.buffer, byteOffset, length);
}

/**
 * [Note: shm control block] One Int32Array over a SharedArrayBuffer per shm group, shared by its
 * ranks' workers: slot 0 is 0 or 1 + the rank that aborted ([Note: abort]); slot 1 the completion
 * wake word; then per rank its doorbell, the seq of the last op it finished, the seq of the last
 * collective it posted; then 2 mailboxes per rank, rank-major. Large ops' buffers and send/recv
 * travel over MessagePorts, read with receiveMessageOnPort (so a blocked worker gets them in order).
 *
 * [Note: shm mailbox] Every collective's header goes into the poster's mailbox of the op's parity
 * (seq & 1), followed by the contribution when it fits INLINE_BYTES. Two suffice: a rank posts op
 * seq+2 only after every peer posted seq+1, which a peer does only after it finished reading seq.
 */
export const ABORT_SLOT = 0;
export const COMPLETION_WAKE = 1;
export const MAILBOX_HEADER_WORDS = 8;
export const INLINE_BYTES = 4096;
export const MAILBOX_WORDS = MAILBOX_HEADER_WORDS + INLINE_BYTES / 4;

export function controlLength(size: number): number {
  return 2 + 3 * size + 2 * size * MAILBOX_WORDS;
}

export function doorbellSlot(rank: number): number {
  return 2 + rank;
}

export function finishedSlot(rank: number, size: number): number {
  return 2 + size + rank;
}

export function postedSlot(rank: number, size: number): number {
  return 2 + 2 * size + rank;
}

export function mailboxSlot(rank: number, size: number, seq: number): number {
  return 2 + 3 * size + (2 * rank + (seq & 1)) * MAILBOX_WORDS;
}

export function createControl(size: number): Int32Array {
  return new Int32Array(new SharedArrayBuffer(controlLength(size) * 4));
}
