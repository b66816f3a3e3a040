import { type MessagePort, receiveMessageOnPort } from 'node:worker_threads';
import { CollectiveError } from '../../errors.js';
import type { CollectiveBuffer } from '../../types.js';
import { reduceBlocks } from '../block-reduce.js';
import { describeOp, type OpMessage } from '../op-message.js';
import { segmentBounds } from '../segments.js';
import { COMPLETION_WAKE, doorbellSlot, finishedSlot } from './shm-control.js';

export interface ShmInit {
  backend: 'shm';
  rank: number;
  size: number;
  control: Int32Array;
  /** Indexed by peer rank in this group; null for this rank. */
  ports: (MessagePort | null)[];
  /** Slot 0 becomes 1 when the main thread destroys the group. */
  abort: Int32Array;
}

/** What a rank posts to every peer when it starts a collective (and to one peer for send). */
interface PeerMessage {
  kind: OpMessage['kind'] | 'ack';
  seq: number;
  dtype: OpMessage['dtype'];
  reduceOp: OpMessage['reduceOp'];
  root: number;
  count: number;
  input: CollectiveBuffer | null;
  output: CollectiveBuffer | null;
  /** For 'ack' of a send the receiver refused: why. */
  refusal?: string;
}

const WAIT_SLICE_MS = 100;

/**
 * The shm backend inside a rank's communication worker. Ranks exchange a message per op (the
 * op's header and its buffers, which are views over SharedArrayBuffers), check that every rank
 * called the same op, then each rank computes its own slice directly in the peers' memory and
 * all wait until everyone is done, so no buffer is handed back while a peer still touches it.
 */
export class ShmEngine {
  private seq = 0;
  private readonly sendSeq: number[];
  private readonly recvSeq: number[];
  private broken: CollectiveError | undefined;

  constructor(private readonly init: ShmInit) {
    this.sendSeq = new Array<number>(init.size).fill(0);
    this.recvSeq = new Array<number>(init.size).fill(0);
  }

  run(op: OpMessage): void {
    if (this.broken !== undefined) throw this.brokenError(op);
    const deadline = Date.now() + op.timeoutMs;
    try {
      if (op.kind === 'send') this.send(op, deadline);
      else if (op.kind === 'recv') this.recv(op, deadline);
      else this.collective(op, deadline);
    } catch (error) {
      if (!(error instanceof CollectiveError) || error.code !== 'mismatch') {
        this.broken =
          error instanceof CollectiveError ? error : new CollectiveError(String(error), { code: 'closed' });
      }
      throw error;
    }
  }

  private collective(op: OpMessage, deadline: number): void {
    const { rank, size } = this.init;
    const seq = ++this.seq;
    const mine = this.messageOf(op, seq);
    for (let peer = 0; peer < size; peer++) if (peer !== rank) this.post(peer, mine);
    const all: PeerMessage[] = [];
    for (let peer = 0; peer < size; peer++)
      all.push(peer === rank ? mine : this.receive(peer, deadline, op, seq));
    for (let peer = 0; peer < size; peer++) this.checkSame(op, seq, mine, all[peer]!, peer);
    this.compute(op, all);
    this.finish(op, seq, deadline);
  }

  private compute(op: OpMessage, all: PeerMessage[]): void {
    const { rank, size } = this.init;
    const count = op.count;
    if (op.kind === 'allReduce') {
      const [start, end] = segmentBounds(rank, count, size);
      const views = all.map((message) => message.output!.subarray(start, end));
      reduceBlocks(views, views, op.dtype, op.reduceOp, size);
    } else if (op.kind === 'reduceScatter') {
      const sources = all.map((message) => message.input!.subarray(rank * count, (rank + 1) * count));
      reduceBlocks(sources, [op.output!], op.dtype, op.reduceOp, size);
    } else if (op.kind === 'allGather') {
      const output = op.output!;
      for (let peer = 0; peer < size; peer++) output.set(all[peer]!.input! as never, peer * count);
    } else if (op.kind === 'broadcast') {
      if (rank !== op.root) op.output!.set(all[op.root]!.output! as never);
    }
  }

  /** Publishes this op as finished and waits until every rank has finished it too. */
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

  private send(op: OpMessage, deadline: number): void {
    const peer = op.root;
    const seq = ++this.sendSeq[peer]!;
    this.post(peer, { ...this.messageOf(op, seq), output: null });
    const ack = this.receive(peer, deadline, op, seq);
    if (ack.kind !== 'ack' || ack.seq !== seq) {
      throw this.mismatch(op, seq, peer, `${describeOp(ack, ack.seq)}`);
    }
    if (ack.refusal !== undefined) throw this.mismatch(op, seq, peer, ack.refusal);
  }

  private recv(op: OpMessage, deadline: number): void {
    const peer = op.root;
    const seq = ++this.recvSeq[peer]!;
    const message = this.receive(peer, deadline, op, seq);
    const fits =
      message.kind === 'send' &&
      message.seq === seq &&
      message.count === op.count &&
      message.dtype === op.dtype;
    if (!fits) {
      const theirs = `${describeOp({ ...message, root: this.init.rank }, message.seq)}`;
      const refusal = `rank ${this.init.rank} expected ${describeOp({ ...op, kind: 'send', root: this.init.rank }, seq)}`;
      if (message.kind === 'send')
        this.post(peer, { ...message, kind: 'ack', input: null, output: null, refusal });
      throw this.mismatch(op, seq, peer, theirs);
    }
    op.output!.set(message.input! as never);
    this.post(peer, { ...message, kind: 'ack', input: null, output: null });
  }

  private messageOf(op: OpMessage, seq: number): PeerMessage {
    return {
      kind: op.kind,
      seq,
      dtype: op.dtype,
      reduceOp: op.reduceOp,
      root: op.root,
      count: op.count,
      input: op.input,
      output: op.output,
    };
  }

  private checkSame(op: OpMessage, seq: number, mine: PeerMessage, theirs: PeerMessage, peer: number): void {
    const same =
      theirs.kind === mine.kind &&
      theirs.seq === mine.seq &&
      theirs.dtype === mine.dtype &&
      theirs.count === mine.count &&
      theirs.root === mine.root &&
      (mine.kind !== 'allReduce' && mine.kind !== 'reduceScatter' ? true : theirs.reduceOp === mine.reduceOp);
    if (!same) throw this.mismatch(op, seq, peer, describeOp(theirs, theirs.seq));
  }

  private mismatch(op: OpMessage, seq: number, peer: number, theirs: string): CollectiveError {
    const ours = describeOp(op, seq);
    return new CollectiveError(
      `Mismatched collective on rank ${this.init.rank}: it called ${ours} but rank ${peer} called ${theirs}.`,
      {
        code: 'mismatch',
        op: op.kind,
        rank: this.init.rank,
        peer,
        expected: ours,
        actual: theirs,
        fix: 'every rank of a group must issue the same ops, in the same order, with the same sizes, dtypes, reductions and roots.',
      },
    );
  }

  private post(peer: number, message: PeerMessage): void {
    this.init.ports[peer]!.postMessage(message);
    Atomics.add(this.init.control, doorbellSlot(peer), 1);
    Atomics.notify(this.init.control, doorbellSlot(peer));
  }

  private receive(peer: number, deadline: number, op: OpMessage, seq: number): PeerMessage {
    const port = this.init.ports[peer]!;
    const slot = doorbellSlot(this.init.rank);
    for (;;) {
      const seen = Atomics.load(this.init.control, slot);
      const received = receiveMessageOnPort(port);
      if (received !== undefined) return received.message as PeerMessage;
      this.block(slot, seen, deadline, op, seq, peer, 'post its part');
    }
  }

  /** One bounded Atomics.wait on a control slot; throws on timeout or when the group is destroyed. */
  private block(
    slot: number,
    seen: number,
    deadline: number,
    op: OpMessage,
    seq: number,
    peer: number,
    what: string,
  ): void {
    const { rank, control, abort } = this.init;
    if (Atomics.load(abort, 0) !== 0) {
      throw new CollectiveError(
        `${describeOp(op, seq)} on rank ${rank} was cancelled: the group was destroyed.`,
        {
          code: 'closed',
          op: op.kind,
          rank,
        },
      );
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      throw new CollectiveError(
        `${describeOp(op, seq)} on rank ${rank} timed out after ${op.timeoutMs} ms waiting for rank ${peer} to ${what}.`,
        {
          code: 'timeout',
          op: op.kind,
          rank,
          peer,
          fix: `check whether rank ${peer} died, stalled or issued a different sequence of ops; raise timeoutMs if it is just slow.`,
        },
      );
    }
    Atomics.wait(control, slot, seen, Math.min(remaining, WAIT_SLICE_MS));
  }

  private brokenError(op: OpMessage): CollectiveError {
    const cause = this.broken!;
    return new CollectiveError(
      `${describeOp(op)} on rank ${this.init.rank} cannot run: the group failed earlier (${cause.message}).`,
      {
        code: cause.code === 'timeout' ? 'peer-lost' : cause.code,
        op: op.kind,
        rank: this.init.rank,
        ...(cause.peer === undefined ? {} : { peer: cause.peer }),
        cause,
        fix: 'destroy this group and restart the job (or the group).',
      },
    );
  }
}
