import type { MessagePort } from 'node:worker_threads';
import {
  decodeBfloat16,
  encodeBfloat16,
  finishAverage,
  reduceInto,
  roundToBfloat16InPlace,
} from '@fsdp-ts/kernels';
import { CollectiveError } from '../../../src/errors.js';
import type { CollectiveBuffer } from '../../../src/index.js';
import {
  EngineBase,
  type EngineContext,
  type EngineInit,
  expectedSendHeader,
  type FailureNotice,
  type NoticeReply,
  type OpHeader,
  sameOp,
} from '../../../src/internal/engine/engine-base.js';
import type { OpMessage } from '../../../src/internal/op-message.js';

export interface LoopbackInit extends EngineInit {
  backend: 'loopback';
  /** Indexed by group rank; null for this rank. */
  ports: (MessagePort | null)[];
}

type Message =
  | { type: 'header'; header: OpHeader }
  | { type: 'data'; bytes: ArrayBuffer }
  | { type: 'abort'; message: string }
  | { type: 'notice'; notice: FailureNotice };

/** One peer's incoming messages, in order, and the receive waiting for the next. */
class Inbox {
  private readonly queued: Message[] = [];
  private waiter: { resolve: (message: Message) => void; reject: (error: Error) => void } | undefined;
  private failure: CollectiveError | undefined;

  constructor(
    readonly peer: number,
    private readonly port: MessagePort,
    onLost: (error: CollectiveError) => void,
    private readonly onAborted: (message: string) => CollectiveError,
  ) {
    port.on('message', (message: Message) => {
      // An abort notice takes effect in order, as the next message read from this peer.
      if (message.type === 'abort' && this.waiter !== undefined) {
        const waiter = this.waiter;
        this.waiter = undefined;
        waiter.reject(onAborted(message.message));
        return;
      }
      const waiter = this.waiter;
      this.waiter = undefined;
      if (waiter === undefined) this.queued.push(message);
      else waiter.resolve(message);
    });
    port.on('close', () => {
      // A peer that aborted and then closed: its notice, still unread, says why.
      const notice = this.queued.find((message) => message.type === 'abort');
      if (notice !== undefined) this.failure ??= onAborted(notice.message);
      this.failure ??= new CollectiveError(`rank ${peer} closed its port`, { code: 'peer-lost', peer });
      // [Note: a closed peer is lost when a read finds nothing left]
      // A peer that finished its last op closes its port right after posting its contribution;
      // what it posted is still queued here (a port delivers its messages before its close). So
      // the close breaks the group only if this rank is waiting on the peer now; otherwise the
      // next read that finds the queue empty does. Breaking at once failed an op whose data from
      // the peer was all queued (seen as a CI flake with 4 thread ranks under load).
      if (this.waiter === undefined) return;
      this.waiter.reject(this.failure);
      this.waiter = undefined;
      onLost(this.failure);
    });
    this.onLost = onLost;
  }

  private readonly onLost: (error: CollectiveError) => void;

  isWaiting(): boolean {
    return this.waiter !== undefined;
  }

  next(): Promise<Message> {
    const queued = this.queued.shift();
    if (queued?.type === 'abort') return Promise.reject(this.onAborted(queued.message));
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.failure !== undefined) {
      this.onLost(this.failure);
      return Promise.reject(this.failure);
    }
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  post(message: Message): void {
    if (this.failure === undefined) this.port.postMessage(message);
  }

  close(): void {
    this.port.close();
  }
}

/**
 * The loopback transport and its schedules: every collective sends whole contributions to the
 * peers that need them and reduces in rank order (so every rank computes the same bits).
 * Sequencing, header checks, timeouts and the broken-group state are EngineBase's.
 */
export class LoopbackEngine extends EngineBase<LoopbackInit> {
  private readonly inboxes: (Inbox | null)[];

  constructor(init: LoopbackInit) {
    super(init);
    this.inboxes = init.ports.map((port, peer) =>
      port === null
        ? null
        : new Inbox(
            peer,
            port,
            (error) => this.breakGroup(error),
            (message) => this.peerAborted(peer, message),
          ),
    );
  }

  protected override async execute(op: OpMessage, seq: number): Promise<void> {
    const header = this.header(op, seq);
    if (op.kind === 'send') {
      this.inbox(op.peer).post({ type: 'header', header });
      this.inbox(op.peer).post({ type: 'data', bytes: toWire(op.input!, op.wireDtype) });
      return;
    }
    if (op.kind === 'recv') return this.recv(op, header);
    for (const inbox of this.inboxes) inbox?.post({ type: 'header', header });
    const received = await Promise.all(
      this.inboxes.map((inbox) => (inbox === null ? null : this.header$(inbox))),
    );
    this.checkHeaders(op, header, received);
    const { rank, size } = this.init;
    const count = op.count;
    switch (op.kind) {
      case 'allReduce': {
        const output = op.output!;
        const all = await this.exchange(() => output, op);
        writeReduced(reduceInRankOrder(all, op, size), output, op);
        break;
      }
      case 'reduceScatter': {
        const input = op.input!;
        const all = await this.exchange((peer) => input.subarray(peer * count, (peer + 1) * count), op);
        writeReduced(reduceInRankOrder(all, op, size), op.output!, op);
        break;
      }
      case 'allGather': {
        const all = await this.exchange(() => op.input!, op);
        for (const [peer, values] of all.entries())
          writeValues(values, op.output!.subarray(peer * count, (peer + 1) * count), op);
        break;
      }
      case 'broadcast': {
        if (rank === op.root) {
          for (const inbox of this.inboxes)
            inbox?.post({ type: 'data', bytes: toWire(op.output!, op.wireDtype) });
          if (op.wireDtype === 'bfloat16') roundToBfloat16InPlace(op.output as Float32Array);
        } else writeValues(await this.data(this.inbox(op.root), op), op.output!, op);
        break;
      }
      default:
        break;
    }
  }

  protected override sendAbort(message: string): void {
    for (const inbox of this.inboxes) inbox?.post({ type: 'abort', message });
  }

  /** [Note: failure agreement]: the notice in order with the ops, then the next message of every peer. */
  protected override async collectNotices(
    notice: FailureNotice,
    _op: OpMessage,
    judge: (peer: number, reply: NoticeReply) => string | undefined,
  ): Promise<string | undefined> {
    for (const inbox of this.inboxes) inbox?.post({ type: 'notice', notice });
    return new Promise((resolve, reject) => {
      const inboxes = this.inboxes.filter((inbox): inbox is Inbox => inbox !== null);
      let waiting = inboxes.length;
      if (waiting === 0) resolve(undefined);
      for (const inbox of inboxes) {
        inbox.next().then((message) => {
          const reply: NoticeReply | undefined =
            message.type === 'notice'
              ? { type: 'notice', notice: message.notice }
              : message.type === 'header'
                ? { type: 'op', header: message.header }
                : undefined;
          if (reply === undefined) return reject(malformed(inbox.peer, 'data where a header belongs'));
          const why = judge(inbox.peer, reply);
          if (why !== undefined) resolve(why);
          else if (--waiting === 0) resolve(undefined);
        }, reject);
      }
    });
  }

  protected override closeTransport(): void {
    for (const inbox of this.inboxes) inbox?.close();
  }

  protected override waitingOn(): number | undefined {
    return this.inboxes.find((inbox) => inbox?.isWaiting() === true)?.peer;
  }

  override close(): void {
    this.closeTransport();
  }

  /** Sends `part(peer)` to every peer and returns every rank's contribution for this rank, in rank order. */
  private async exchange(part: (peer: number) => CollectiveBuffer, op: OpMessage): Promise<Contribution[]> {
    for (const [peer, inbox] of this.inboxes.entries())
      inbox?.post({ type: 'data', bytes: toWire(part(peer), op.wireDtype) });
    const own = contribution(part(this.init.rank).slice(), op);
    return Promise.all(this.inboxes.map((inbox) => (inbox === null ? own : this.data(inbox, op))));
  }

  private async recv(op: OpMessage, header: OpHeader): Promise<void> {
    const inbox = this.inbox(op.peer);
    const theirs = await this.header$(inbox);
    const expected = expectedSendHeader(header, this.init.rank);
    if (!sameOp(expected, theirs)) {
      // The sender's payload is already queued; the stream can no longer be trusted.
      throw new CollectiveError(this.mismatch(op, expected, theirs, op.peer).message, {
        code: 'malformed-frame',
        op: op.kind,
        rank: this.init.rank,
        peer: op.peer,
      });
    }
    writeValues(await this.data(inbox, op), op.output!, op);
  }

  private inbox(peer: number): Inbox {
    return this.inboxes[peer]!;
  }

  private async header$(inbox: Inbox): Promise<OpHeader> {
    const message = await inbox.next();
    // A failing peer's notice where its header belongs: it did not issue this op ([Note: failure agreement]).
    if (message.type === 'notice') throw this.peerAborted(inbox.peer, message.notice.message);
    if (message.type !== 'header') throw malformed(inbox.peer, 'data where a header belongs');
    return message.header;
  }

  private async data(inbox: Inbox, op: OpMessage): Promise<Contribution> {
    const message = await inbox.next();
    if (message.type !== 'data') throw malformed(inbox.peer, 'a header where data belongs');
    return fromWire(message.bytes, op);
  }
}

/** Values as reductions see them: float32 for float32 and bfloat16 data, int32 for int32. */
type Contribution = Float32Array | Int32Array;

function malformed(peer: number, what: string): CollectiveError {
  return new CollectiveError(`Malformed message from rank ${peer}: ${what}.`, {
    code: 'malformed-frame',
    peer,
  });
}

/** A copy of `values` as it travels: bfloat16 bits when the wire is bfloat16, else the raw elements. */
function toWire(values: CollectiveBuffer, wireDtype: OpMessage['wireDtype']): ArrayBuffer {
  if (wireDtype === 'bfloat16' && values instanceof Float32Array) {
    const bits = new Uint16Array(values.length);
    encodeBfloat16(values, bits);
    return bits.buffer;
  }
  return values.slice().buffer as ArrayBuffer;
}

function fromWire(bytes: ArrayBuffer, op: OpMessage): Contribution {
  if (op.dtype === 'int32') return new Int32Array(bytes);
  if (op.dtype === 'float32' && op.wireDtype !== 'bfloat16') return new Float32Array(bytes);
  const bits = new Uint16Array(bytes);
  const values = new Float32Array(bits.length);
  decodeBfloat16(bits, values);
  return values;
}

/** This rank's own contribution, as a peer would receive it. */
function contribution(values: CollectiveBuffer, op: OpMessage): Contribution {
  const wire = toWire(values, op.wireDtype);
  return fromWire(wire, op);
}

function reduceInRankOrder(all: Contribution[], op: OpMessage, size: number): Contribution {
  const result = all[0]!.slice();
  for (let peer = 1; peer < all.length; peer++) reduceInto(result, all[peer]!, op.reduceOp);
  if (op.reduceOp === 'avg') finishAverage(result as Float32Array, size);
  return result;
}

/** Writes reduced values into the op's buffer (rounded to bfloat16 where the data or wire is). */
function writeReduced(values: Contribution, target: CollectiveBuffer, op: OpMessage): void {
  if (op.dtype === 'float32' && op.wireDtype === 'bfloat16') roundToBfloat16InPlace(values as Float32Array);
  writeValues(values, target, op);
}

function writeValues(values: Contribution, target: CollectiveBuffer, _op?: OpMessage): void {
  if (target instanceof Uint16Array) encodeBfloat16(values as Float32Array, target);
  else target.set(values as never);
}

/** This engine module's entry (see src/internal/engine/engine-base.ts). */
export function createEngine(init: EngineInit, context: EngineContext): LoopbackEngine {
  const engine = new LoopbackEngine(init as LoopbackInit);
  context.notify({ type: 'ready' });
  return engine;
}
