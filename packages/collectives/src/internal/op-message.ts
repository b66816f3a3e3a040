import type { CollectiveBuffer, CollectiveDtype, CollectiveKind, ReduceOp } from '../types.js';

/** The values of an op's fields in the order their wire and mailbox codes number them. */
export const OP_KINDS: readonly CollectiveKind[] = [
  'allReduce',
  'allGather',
  'reduceScatter',
  'broadcast',
  'barrier',
  'send',
  'recv',
];
export const DTYPES: readonly CollectiveDtype[] = ['float32', 'int32', 'bfloat16'];
export const REDUCE_OPS: readonly ReduceOp[] = ['sum', 'avg', 'max', 'min'];

/** One op for the communication worker; buffers are views over SharedArrayBuffers. */
export interface OpMessage {
  type: 'op';
  kind: CollectiveKind;
  dtype: CollectiveDtype;
  wireDtype: 'float32' | 'bfloat16';
  reduceOp: ReduceOp;
  /** broadcast: the root; otherwise -1. */
  root: number;
  /** send: the destination; recv: the source; otherwise -1. */
  peer: number;
  /**
   * Elements per rank: allReduce/broadcast/send/recv the buffer's length, allGather the input's,
   * reduceScatter the output's, barrier 0.
   */
  count: number;
  input: CollectiveBuffer | null;
  output: CollectiveBuffer | null;
  status: Int32Array;
  timeoutMs: number;
  /** recoverOrAbort's op (kind 'barrier'): the failure to agree on ([Note: failure agreement]). */
  notice?: { fingerprint: string; message: string };
}

/** 'abort': [Note: abort]; 'depart': [Note: process exit]; 'connect': tcp's peer endpoints. */
export type MainToWorkerMessage =
  | OpMessage
  | { type: 'destroy' }
  | { type: 'abort'; message: string }
  | { type: 'depart' }
  | { type: 'connect'; endpoints: string[] };

export function describeOp(
  op: {
    kind: string;
    dtype: string;
    count: number;
    reduceOp: string;
    root: number;
    peer: number;
    notice?: unknown;
  },
  seq?: number,
): string {
  if (op.notice !== undefined) return `failure agreement${seq === undefined ? '' : ` #${seq}`}`;
  const extra =
    op.kind === 'allReduce' || op.kind === 'reduceScatter'
      ? `, op ${op.reduceOp}`
      : op.kind === 'broadcast'
        ? `, root ${op.root}`
        : op.kind === 'send' || op.kind === 'recv'
          ? `, peer ${op.peer}`
          : '';
  const sequence = seq === undefined ? '' : ` #${seq}`;
  return `${op.kind}${sequence} (${op.count} ${op.dtype} elements${extra})`;
}
