import { type MessagePort, receiveMessageOnPort } from 'node:worker_threads';
import type { CollectiveError } from '../../errors.js';
import type { CollectiveBuffer } from '../../types.js';
import { blockAliasing, segmentBounds } from '../aliasing.js';
import {
  EngineBase,
  type EngineContext,
  type EngineInit,
  expectedSendHeader,
  type FailureNotice,
  type NoticeReply,
  type OpHeader,
  sameOp,
} from '../engine/engine-base.js';
import { describeOp, type OpMessage } from '../op-message.js';
import type { SharedMemory } from './shm-arena.js';
import {
  ABORT_SLOT,
  COMPLETION_WAKE,
  doorbellSlot,
  finishedSlot,
  postedNotice,
  postedSlot,
  readContribution,
  readHeader,
  travelsInline,
  writeMailbox,
  writeNoticeMailbox,
} from './shm-mailbox.js';
import { reduceShared } from './shm-reduce.js';

export interface ShmInit extends EngineInit {
  backend: 'shm';
  control: Int32Array;
  /** By group rank; null for this rank. */
  ports: (MessagePort | null)[];
  /** [Note: shm arena] */
  arena: SharedMemory | null;
}

type PeerMessage =
  | { type: 'abort'; message: string }
  | { type: 'notice'; notice: FailureNotice }
  | { type: 'op'; header: OpHeader; input: CollectiveBuffer | null; output: CollectiveBuffer | null }
  | { type: 'ack'; seq: number; refusal?: string };

const WAIT_SLICE_MS = 100;

/**
 * The shm engine: ranks exchange headers and buffers, then each computes its own slice in the
 * peers' memory, and all wait until everyone is done, so no buffer is handed back while a peer
 * still touches it. It blocks the thread (Atomics.wait), so it checks each op's deadline itself.
 */
export class ShmEngine extends EngineBase<ShmInit> {
  protected override execute(op: OpMessage, seq: number): void {
    const deadline = Date.now() + op.timeoutMs;
    // No wire: wireDtype is not part of what ranks agree on.
    const header: OpHeader = { ...this.header(op, seq), wireDtype: 'float32' };
    if (op.kind === 'send') this.send(op, header, deadline);
    else if (op.kind === 'recv') this.recv(op, header, deadline);
    else this.collective(op, header, deadline);
  }

  /**
   * [Note: abort] on shm: the notice goes to every peer's port, and the aborting rank's number
   * (plus one) into the control block's slot 0, so a peer blocked in Atomics.wait on any slot
   * wakes, sees it and reads the notice.
   */
  protected override sendAbort(message: string): void {
    const { rank, size, control } = this.init;
    // The notices first: a peer that sees the slot must find this rank's notice on its port.
    for (let peer = 0; peer < size; peer++) if (peer !== rank) this.post(peer, { type: 'abort', message });
    Atomics.compareExchange(control, ABORT_SLOT, 0, rank + 1);
    Atomics.add(control, COMPLETION_WAKE, 1);
    Atomics.notify(control, COMPLETION_WAKE);
  }

  private abortNotice(peer: number): CollectiveError {
    for (;;) {
      const received = receiveMessageOnPort(this.init.ports[peer]!);
      if (received === undefined) return this.peerAborted(peer, 'an error (its notice was lost)');
      const message = received.message as PeerMessage;
      if (message.type === 'abort') return this.peerAborted(peer, message.message);
    }
  }

  /**
   * [Note: failure agreement] on shm: the notice goes to every peer's port and a notice mark into
   * this rank's mailbox for the agreement's sequence number, where a peer looks for its next
   * header; then every peer's mailbox for that number is judged as it comes in.
   */
  protected override collectNotices(
    notice: FailureNotice,
    op: OpMessage,
    judge: (peer: number, reply: NoticeReply) => string | undefined,
  ): string | undefined {
    const { rank, size, control, ports } = this.init;
    const deadline = Date.now() + op.timeoutMs;
    writeNoticeMailbox(control, rank, size, notice.seq);
    for (let peer = 0; peer < size; peer++)
      if (peer !== rank) ports[peer]!.postMessage({ type: 'notice', notice });
    Atomics.store(control, postedSlot(rank, size), notice.seq);
    for (let peer = 0; peer < size; peer++) if (peer !== rank) this.ring(peer);
    const waiting = new Set<number>();
    for (let peer = 0; peer < size; peer++) if (peer !== rank) waiting.add(peer);
    const slot = doorbellSlot(rank);
    while (waiting.size > 0) {
      const seen = Atomics.load(control, slot);
      for (const peer of [...waiting]) {
        if (Atomics.load(control, postedSlot(peer, size)) < notice.seq) continue;
        const reply: NoticeReply | undefined = postedNotice(control, peer, size, notice.seq)
          ? this.noticeOnPort(peer)
          : { type: 'op', header: readHeader(control, peer, size, notice.seq) };
        if (reply === undefined) continue;
        const why = judge(peer, reply);
        if (why !== undefined) return why;
        waiting.delete(peer);
      }
      if (waiting.size > 0)
        this.block(slot, seen, deadline, op, notice.seq, [...waiting][0]!, 'reply to the failure notice');
    }
    return undefined;
  }

  private noticeOnPort(peer: number): NoticeReply | undefined {
    for (;;) {
      const received = receiveMessageOnPort(this.init.ports[peer]!);
      if (received === undefined) return undefined;
      const message = received.message as PeerMessage;
      if (message.type === 'abort') throw this.peerAborted(peer, message.message);
      if (message.type === 'notice') return { type: 'notice', notice: message.notice };
    }
  }

  private peerFailed(peer: number): CollectiveError {
    const reply = this.noticeOnPort(peer);
    return this.peerAborted(peer, reply?.type === 'notice' ? reply.notice.message : 'an error');
  }

  /** Peers blocked on this rank wake up on their own deadlines. */
  protected override closeTransport(): void {}

  override close(): void {}

  /**
   * Every rank posts its header in its mailbox ([Note: shm mailbox]) and, for an op too large to
   * travel inline, its buffers on every peer's port, then rings each doorbell once. An inline op
   * then computes from the mailboxes into its own buffers, with no finish phase but a barrier's
   * ([Note: shm barrier exit]); a large op computes its slice in the peers' memory and waits until
   * every rank has finished.
   */
  private collective(op: OpMessage, header: OpHeader, deadline: number): void {
    const { rank, size, control } = this.init;
    const inline = travelsInline(header, size);
    writeMailbox(control, rank, size, header, op);
    const mine = { type: 'op' as const, header, input: op.input, output: op.output };
    if (!inline)
      for (let peer = 0; peer < size; peer++) if (peer !== rank) this.init.ports[peer]!.postMessage(mine);
    Atomics.store(control, postedSlot(rank, size), header.seq);
    for (let peer = 0; peer < size; peer++) if (peer !== rank) this.ring(peer);
    const headers: (OpHeader | null)[] = [];
    for (let peer = 0; peer < size; peer++)
      headers.push(peer === rank ? null : this.receiveHeader(peer, deadline, op, header.seq));
    if (headers.some((theirs) => theirs !== null && !sameOp(header, theirs))) {
      // Drop the buffers peers posted for it: nothing stale for the next op.
      headers.forEach((theirs, peer) => {
        if (theirs !== null && !travelsInline(theirs, size)) this.receive(peer, deadline, op, header.seq);
      });
      this.checkHeaders(op, header, headers);
    }
    if (inline) {
      this.computeInline(op, header);
      // [Note: shm barrier exit] A barrier waits until every rank finished it, so ranks leave
      // together (else a rank goes while a peer still waits for its wake-up, and its next timing
      // absorbs the lag).
      if (op.kind === 'barrier') this.finish(op, header.seq, deadline);
      return;
    }
    const all: OpPost[] = [];
    for (let peer = 0; peer < size; peer++)
      all.push(peer === rank ? mine : this.receiveOp(peer, deadline, op, header));
    this.compute(op, all);
    this.finish(op, header.seq, deadline);
  }

  private receiveHeader(peer: number, deadline: number, op: OpMessage, seq: number): OpHeader {
    const { rank, size, control } = this.init;
    const slot = doorbellSlot(rank);
    for (;;) {
      const seen = Atomics.load(control, slot);
      if (Atomics.load(control, postedSlot(peer, size)) >= seq) {
        if (postedNotice(control, peer, size, seq)) throw this.peerFailed(peer);
        return readHeader(control, peer, size, seq);
      }
      this.block(slot, seen, deadline, op, seq, peer, 'post its part');
    }
  }

  private computeInline(op: OpMessage, header: OpHeader): void {
    const { rank, size, control } = this.init;
    const count = op.count;
    const contributions: CollectiveBuffer[] = [];
    if (op.kind === 'barrier' || count === 0) return;
    if (op.kind === 'broadcast') {
      if (rank !== op.root) op.output!.set(readContribution(control, op.root, size, header) as never);
      return;
    }
    for (let peer = 0; peer < size; peer++) contributions.push(readContribution(control, peer, size, header));
    if (op.kind === 'allReduce') reduceShared(contributions, [op.output!], op.dtype, op.reduceOp, size);
    else if (op.kind === 'reduceScatter') {
      const sources = contributions.map((source) => source.subarray(rank * count, (rank + 1) * count));
      reduceShared(sources, [op.output!], op.dtype, op.reduceOp, size);
    } else if (op.kind === 'allGather')
      for (const [peer, source] of contributions.entries()) op.output!.set(source as never, peer * count);
  }

  private compute(op: OpMessage, all: OpPost[]): void {
    const { rank, size } = this.init;
    const count = op.count;
    if (op.kind === 'allReduce') {
      const [start, end] = segmentBounds(rank, count, size);
      const views = all.map((message) => message.output!.subarray(start, end));
      reduceShared(views, views, op.dtype, op.reduceOp, size, this.init.arena);
    } else if (op.kind === 'reduceScatter') {
      const sources = all.map((message) => message.input!.subarray(rank * count, (rank + 1) * count));
      reduceShared(sources, [op.output!], op.dtype, op.reduceOp, size, this.init.arena);
    } else if (op.kind === 'allGather') {
      // Each rank pushes its input into every output (in place, its own is already there).
      const inPlace = blockAliasing(op.output!, op.input!, rank, this.init.arena) === 'in place';
      const targets = all.filter((_, peer) => !(inPlace && peer === rank)).map((message) => message.output!);
      pushGather(op.input!, targets, rank * count);
    } else if (op.kind === 'broadcast') {
      if (rank !== op.root) op.output!.set(all[op.root]!.output! as never);
    }
  }

  private finish(op: OpMessage, seq: number, deadline: number): void {
    const { rank, size, control } = this.init;
    Atomics.store(control, finishedSlot(rank, size), seq);
    Atomics.add(control, COMPLETION_WAKE, 1);
    Atomics.notify(control, COMPLETION_WAKE);
    for (;;) {
      const seen = Atomics.load(control, COMPLETION_WAKE);
      let missing = -1;
      for (let peer = 0; peer < size && missing < 0; peer++) {
        if (Atomics.load(control, finishedSlot(peer, size)) < seq) missing = peer;
      }
      if (missing < 0) return;
      this.block(COMPLETION_WAKE, seen, deadline, op, seq, missing, 'finish its part');
    }
  }

  private send(op: OpMessage, header: OpHeader, deadline: number): void {
    const peer = op.peer;
    this.post(peer, { type: 'op', header, input: op.input, output: null });
    const ack = this.receive(peer, deadline, op, header.seq);
    if (ack.type !== 'ack' || ack.seq !== header.seq) {
      const theirs = ack.type === 'op' ? ack.header : `an acknowledgement of send #${ack.seq}`;
      throw this.mismatch(op, header, theirs, peer);
    }
    if (ack.refusal !== undefined) throw this.mismatch(op, header, ack.refusal, peer);
  }

  private recv(op: OpMessage, header: OpHeader, deadline: number): void {
    const peer = op.peer;
    const message = this.receiveOp(peer, deadline, op, header);
    const expected = expectedSendHeader(header, this.init.rank);
    if (!sameOp(expected, message.header)) {
      const refusal = `rank ${this.init.rank} expected ${describeOp(expected, expected.seq)}`;
      if (message.header.kind === 'send') this.post(peer, { type: 'ack', seq: message.header.seq, refusal });
      throw this.mismatch(op, header, message.header, peer);
    }
    op.output!.set(message.input! as never);
    this.post(peer, { type: 'ack', seq: message.header.seq });
  }

  private receiveOp(peer: number, deadline: number, op: OpMessage, header: OpHeader): OpPost {
    const message = this.receive(peer, deadline, op, header.seq);
    if (message.type === 'op') return message;
    throw this.mismatch(op, header, `an acknowledgement of send #${message.seq}`, peer);
  }

  private post(peer: number, message: PeerMessage): void {
    this.init.ports[peer]!.postMessage(message);
    this.ring(peer);
  }

  private ring(peer: number): void {
    Atomics.add(this.init.control, doorbellSlot(peer), 1);
    Atomics.notify(this.init.control, doorbellSlot(peer));
  }

  private receive(
    peer: number,
    deadline: number,
    op: OpMessage,
    seq: number,
  ): Exclude<PeerMessage, { type: 'abort' } | { type: 'notice' }> {
    const port = this.init.ports[peer]!;
    const slot = doorbellSlot(this.init.rank);
    for (;;) {
      const seen = Atomics.load(this.init.control, slot);
      const received = receiveMessageOnPort(port);
      if (received !== undefined) {
        const message = received.message as PeerMessage;
        if (message.type === 'abort') throw this.peerAborted(peer, message.message);
        if (message.type === 'notice') throw this.peerAborted(peer, message.notice.message);
        return message;
      }
      this.block(slot, seen, deadline, op, seq, peer, 'post its part');
    }
  }

  /** One bounded Atomics.wait; throws on timeout, destroy or abort. */
  private block(
    slot: number,
    seen: number,
    deadline: number,
    op: OpMessage,
    seq: number,
    peer: number,
    what: string,
  ): void {
    const { control, abort } = this.init;
    if (Atomics.load(abort, 0) !== 0) throw this.cancelledError(op, seq);
    const aborting = Atomics.load(control, ABORT_SLOT) - 1;
    if (aborting >= 0 && aborting !== this.init.rank) throw this.abortNotice(aborting);
    const remaining = deadline - Date.now();
    if (remaining <= 0) throw this.timeoutError(op, seq, peer, ` to ${what}`);
    Atomics.wait(control, slot, seen, Math.min(remaining, WAIT_SLICE_MS));
  }
}

type OpPost = Extract<PeerMessage, { type: 'op' }>;

export function createEngine(init: EngineInit, context: EngineContext): ShmEngine {
  const engine = new ShmEngine(init as ShmInit);
  context.notify({ type: 'ready' });
  return engine;
}

/** Elements per all-gather block: small enough to stay in L2 between its n copies. */
const GATHER_BLOCK = 65_536;

/** `input` into every target from element `offset` on, block by block: n + 1 passes, not 2n. */
export function pushGather(
  input: CollectiveBuffer,
  targets: readonly CollectiveBuffer[],
  offset: number,
): void {
  const count = input.length;
  for (let start = 0; start < count; start += GATHER_BLOCK) {
    const block = input.subarray(start, Math.min(count, start + GATHER_BLOCK));
    for (const target of targets) target.set(block as never, offset + start);
  }
}
