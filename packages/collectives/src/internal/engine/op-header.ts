import type { CollectiveDtype, CollectiveKind, ReduceOp } from '../../types.js';
import type { OpMessage } from '../op-message.js';

/**
 * What every rank states about an op before any payload moves, whatever the transport: the tcp
 * backend writes it as a 32-byte frame ([Note: op header]), shm and in-process backends post it
 * as a message. The engine base compares it with every peer's ([Note: engine base]).
 */
export interface OpHeader {
  kind: CollectiveKind;
  dtype: CollectiveDtype;
  wireDtype: 'float32' | 'bfloat16';
  reduceOp: ReduceOp;
  /** Per group for collectives; per peer and direction for send/recv. */
  seq: number;
  /** broadcast: the root; otherwise -1. */
  root: number;
  /** send: the destination; recv: the source; otherwise -1. */
  peer: number;
  count: number;
}

export function headerOf(op: OpMessage, seq: number): OpHeader {
  return {
    kind: op.kind,
    dtype: op.dtype,
    wireDtype: op.wireDtype,
    reduceOp: op.reduceOp,
    seq,
    root: op.root,
    peer: op.peer,
    count: op.count,
  };
}

/**
 * The header a sender's `send` must carry for this rank's `recv` to accept it: same sequence,
 * dtype and count, and this rank as its destination.
 */
export function expectedSendHeader(recv: OpHeader, receiver: number): OpHeader {
  return { ...recv, kind: 'send', peer: receiver };
}

/** Whether two headers describe the same op (the reduction only matters for reducing ops). */
export function sameOp(mine: OpHeader, theirs: OpHeader): boolean {
  const reduces = mine.kind === 'allReduce' || mine.kind === 'reduceScatter';
  return (
    mine.kind === theirs.kind &&
    mine.dtype === theirs.dtype &&
    mine.wireDtype === theirs.wireDtype &&
    (!reduces || mine.reduceOp === theirs.reduceOp) &&
    mine.seq === theirs.seq &&
    mine.root === theirs.root &&
    mine.peer === theirs.peer &&
    mine.count === theirs.count
  );
}
