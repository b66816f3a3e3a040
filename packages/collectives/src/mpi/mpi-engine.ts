import { CollectiveError } from '../errors.js';
import { decodeBfloat16, encodeBfloat16, roundToBfloat16InPlace } from '../internal/bfloat16.js';
import type { EngineContext, EngineInit } from '../internal/engine/engine.js';
import { EngineBase } from '../internal/engine/engine-base.js';
import type { FailureNotice, NoticeReply } from '../internal/engine/failure-notice.js';
import { expectedSendHeader, type OpHeader, sameOp } from '../internal/engine/op-header.js';
import type { OpMessage } from '../internal/op-message.js';
import type { CollectiveBuffer } from '../types.js';
import { loadMpiLibrary, MPI_ANY_SOURCE, type MpiLibrary } from './mpi-library.js';

/** What the mpi backend's communication worker starts from. */
export interface MpiInit extends EngineInit {
  /** koffi, resolved on the main thread. */
  koffiPath: string;
  /** The MPI library the main thread initialised (the same file). */
  libraryPath: string;
  /** MPI_COMM_WORLD rank of each group rank. */
  worldRanks: number[];
  /** MPI_Comm_create_group's tag: tells apart groups created at the same time. */
  tag: number;
}

/** Point-to-point tags on a group's communicator (collectives have their own context). */
const HEADER_TAG = 1;
const PAYLOAD_TAG = 2;
const ABORT_TAG = 3;
/** Headers of send/recv: their own stream, as their sequence numbers are their own. */
const PEER_HEADER_TAG = 4;
/** Bytes of one header, failure notice or abort notice (JSON, zero-padded). */
const MESSAGE_BYTES = 4096;
/**
 * [Note: mpi progress] MPI moves bytes only inside MPI calls (Open MPI's shared-memory and tcp
 * transports have no progress thread), so an op's requests are tested back to back for
 * SPIN_MS, the event loop gets a turn (the base's timeout timer, abort and destroy messages),
 * and so on. After BUSY_MS of one op the worker sleeps IDLE_SLEEP_MS between tests, so a rank
 * waiting for a peer that computes leaves the core to the main thread.
 */
const SPIN_MS = 2;
const BUSY_MS = 50;
const IDLE_SLEEP_MS = 0.1;

type Message =
  | { header: OpHeader }
  | { notice: FailureNotice }
  | { abort: { rank: number; message: string } };

/**
 * [Note: mpi engine] One communicator per group (MPI_Comm_create_group over MPI_COMM_WORLD with
 * the group's world ranks), on which every op is non-blocking: first the op header to every
 * peer and each peer's header from it (tag HEADER_TAG, so a mismatch fails before any payload
 * moves and a peer that never issues the op is named by its missing header), then the MPI
 * collective (MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Ibcast,
 * MPI_Ibarrier) or MPI_Isend/MPI_Irecv (tag PAYLOAD_TAG), progressed by MPI_Test ([Note: mpi
 * progress]). An abort notice travels on ABORT_TAG; one receive from any source is posted while
 * the group lives and tested with every op. bfloat16 ([Note: mpi bfloat16]): gathers and
 * broadcasts move the 16-bit values; reductions reduce in float32 (MPI has no bfloat16 sum).
 */
class MpiEngine extends EngineBase<MpiInit> {
  private readonly mpi: MpiLibrary;
  private readonly comm = new BigUint64Array(1);
  private readonly flag = new Int32Array(1);
  private readonly status = new Int32Array(8);
  private readonly sleep = new Int32Array(new SharedArrayBuffer(4));
  private readonly abortRequest = new BigUint64Array(1);
  private readonly abortMessage = new Uint8Array(MESSAGE_BYTES);
  /** Abort notices sent, kept alive until the group closes (MPI reads them later). */
  private readonly sent: { request: BigUint64Array; bytes: Uint8Array }[] = [];
  /** Header receives of the running op, by peer (null: none from that peer), for waitingOn. */
  private headerRequests: (BigUint64Array | null)[] = [];
  private waitingPeer: number | undefined;
  /** Ops left with requests in flight (timeout, abort): their communicator cannot be freed. */
  private abandoned = false;
  private closed = false;

  constructor(init: MpiInit, context: EngineContext) {
    super(init);
    this.mpi = loadMpiLibrary(init.koffiPath, init.libraryPath, init.rank);
    const world = new BigUint64Array(1);
    const group = new BigUint64Array(1);
    this.check(this.mpi.commGroup(this.mpi.handles.commWorld, world), 'MPI_Comm_group');
    this.check(
      this.mpi.groupIncl(world, init.worldRanks.length, Int32Array.from(init.worldRanks), group),
      'MPI_Group_incl',
    );
    // Blocks until every member called it (their workers start at the same time).
    this.check(
      this.mpi.commCreateGroup(this.mpi.handles.commWorld, group, init.tag, this.comm),
      'MPI_Comm_create_group',
    );
    this.mpi.groupFree(group);
    this.mpi.groupFree(world);
    this.check(this.mpi.returnErrors(this.comm), 'MPI_Comm_set_errhandler');
    this.postAbortReceive();
    context.notify({ type: 'ready' });
  }

  protected override async execute(op: OpMessage, seq: number): Promise<void> {
    this.checkAbortNotice();
    const mine = this.header(op, seq);
    if (op.kind === 'send') {
      await this.complete(
        this.sendRequests(op.peer, this.encode({ header: mine }), PEER_HEADER_TAG),
        op.peer,
      );
      await this.sendRecv(op, 'send');
      return;
    }
    if (op.kind === 'recv') {
      const received = await this.receiveFrom([op.peer], PEER_HEADER_TAG);
      const theirs = this.headerOf(op.peer, received[op.peer]!);
      const expected = expectedSendHeader(mine, this.init.rank);
      if (!sameOp(expected, theirs)) {
        // The sender's payload is on its way and nobody will receive it: the stream is lost.
        const error = this.mismatch(op, expected, theirs, op.peer);
        this.markBroken(error);
        throw error;
      }
      await this.sendRecv(op, 'recv');
      return;
    }
    await this.exchangeHeaders(op, mine);
    await this.collective(op);
  }

  /** Sends `mine` to every peer and checks every peer's header ([Note: engine base]). */
  private async exchangeHeaders(op: OpMessage, mine: OpHeader): Promise<void> {
    const peers = this.peers();
    if (peers.length === 0) return;
    const sends = this.sendRequests(peers, this.encode({ header: mine }));
    const received = await this.receiveFrom(peers);
    await this.complete(sends);
    const headers = received.map((bytes, peer) => (bytes === null ? null : this.headerOf(peer, bytes)));
    this.checkHeaders(op, mine, headers);
  }

  private async collective(op: OpMessage): Promise<void> {
    const { mpi } = this;
    const { float, int, uint16, sum, max, min } = mpi.handles;
    const request = new BigUint64Array(1);
    const reduction = op.reduceOp === 'max' ? max : op.reduceOp === 'min' ? min : sum;
    const size = this.init.size;
    const reducedAs = (buffer: CollectiveBuffer | null) =>
      op.dtype === 'int32' ? buffer : buffer instanceof Uint16Array ? widen(buffer) : buffer;
    const finish = (values: Float32Array | Int32Array, into: CollectiveBuffer) => {
      if (op.reduceOp === 'avg') for (let index = 0; index < values.length; index++) values[index]! /= size;
      if (into instanceof Uint16Array) encodeBfloat16(values as Float32Array, into);
      else {
        if (op.wireDtype === 'bfloat16') roundToBfloat16InPlace(values as Float32Array);
        if (values !== into) into.set(values);
      }
    };
    const reduceType = op.dtype === 'int32' ? int : float;
    switch (op.kind) {
      case 'barrier':
        this.check(mpi.ibarrier(this.comm, request), 'MPI_Ibarrier');
        await this.complete(request);
        return;
      case 'allReduce': {
        const output = op.output!;
        const values = reducedAs(output) as Float32Array | Int32Array;
        if (op.wireDtype === 'bfloat16') roundToBfloat16InPlace(values as Float32Array);
        this.check(
          mpi.iallreduce(null, values, op.count, reduceType, reduction, this.comm, request),
          'MPI_Iallreduce',
        );
        await this.complete(request);
        finish(values, output);
        return;
      }
      case 'reduceScatter': {
        const input = op.input!;
        const output = op.output!;
        let values = reducedAs(input) as Float32Array | Int32Array;
        if (op.wireDtype === 'bfloat16') {
          values = Float32Array.from(values as Float32Array);
          roundToBfloat16InPlace(values);
        }
        // MPI forbids aliased buffers; in place (output inside input) reduces into a scratch.
        const target =
          output instanceof Uint16Array || overlaps(input, output) ? scratchLike(values, op.count) : output;
        this.check(
          mpi.ireduceScatterBlock(values, target, op.count, reduceType, reduction, this.comm, request),
          'MPI_Ireduce_scatter_block',
        );
        await this.complete(request);
        finish(target as Float32Array | Int32Array, output);
        return;
      }
      case 'allGather': {
        const input = op.input!;
        const output = op.output!;
        if (op.wireDtype === 'bfloat16') {
          const bits = new Uint16Array(op.count);
          encodeBfloat16(input as Float32Array, bits);
          const gathered = new Uint16Array(op.count * size);
          this.check(mpi.iallgather(bits, op.count, uint16, gathered, this.comm, request), 'MPI_Iallgather');
          await this.complete(request);
          decodeBfloat16(gathered, output as Float32Array);
          return;
        }
        const type = op.dtype === 'bfloat16' ? uint16 : op.dtype === 'int32' ? int : float;
        const inPlace = isBlock(output, input, this.init.rank);
        this.check(
          mpi.iallgather(inPlace ? null : input, op.count, type, output, this.comm, request),
          'MPI_Iallgather',
        );
        await this.complete(request);
        return;
      }
      case 'broadcast': {
        const buffer = op.output!;
        const root = this.init.rank === op.root;
        if (op.wireDtype === 'bfloat16') {
          const bits = new Uint16Array(op.count);
          if (root) encodeBfloat16(buffer as Float32Array, bits);
          this.check(mpi.ibcast(bits, op.count, uint16, op.root, this.comm, request), 'MPI_Ibcast');
          await this.complete(request);
          decodeBfloat16(bits, buffer as Float32Array);
          return;
        }
        const type = op.dtype === 'bfloat16' ? uint16 : op.dtype === 'int32' ? int : float;
        this.check(mpi.ibcast(buffer, op.count, type, op.root, this.comm, request), 'MPI_Ibcast');
        await this.complete(request);
        return;
      }
      default:
        throw new Error(`the mpi engine has no schedule for ${op.kind}`);
    }
  }

  private async sendRecv(op: OpMessage, direction: 'send' | 'recv'): Promise<void> {
    const { mpi } = this;
    const type =
      op.dtype === 'bfloat16'
        ? mpi.handles.uint16
        : op.dtype === 'int32'
          ? mpi.handles.int
          : mpi.handles.float;
    const request = new BigUint64Array(1);
    const code =
      direction === 'send'
        ? mpi.isend(op.input, op.count, type, op.peer, PAYLOAD_TAG, this.comm, request)
        : mpi.irecv(op.output, op.count, type, op.peer, PAYLOAD_TAG, this.comm, request);
    this.check(code, direction === 'send' ? 'MPI_Isend' : 'MPI_Irecv');
    await this.complete(request, op.peer);
  }

  /** Receives one message from each of `peers` on HEADER_TAG; by group rank, null for the others. */
  private async receiveFrom(peers: readonly number[], tag = HEADER_TAG): Promise<(Uint8Array | null)[]> {
    const messages: (Uint8Array | null)[] = new Array(this.init.size).fill(null);
    const requests = new BigUint64Array(peers.length);
    this.headerRequests = new Array(this.init.size).fill(null);
    peers.forEach((peer, index) => {
      const bytes = new Uint8Array(MESSAGE_BYTES);
      messages[peer] = bytes;
      const request = requests.subarray(index, index + 1);
      this.headerRequests[peer] = request;
      this.check(
        this.mpi.irecv(bytes, MESSAGE_BYTES, this.mpi.handles.byte, peer, tag, this.comm, request),
        'MPI_Irecv',
      );
    });
    try {
      await this.complete(requests);
    } finally {
      this.headerRequests = [];
    }
    return messages;
  }

  private sendRequests(
    peers: number | readonly number[],
    bytes: Uint8Array,
    tag = HEADER_TAG,
  ): BigUint64Array {
    const list = typeof peers === 'number' ? [peers] : peers;
    const requests = new BigUint64Array(list.length);
    for (const [index, peer] of list.entries()) {
      const request = requests.subarray(index, index + 1);
      this.check(
        this.mpi.isend(bytes, bytes.length, this.mpi.handles.byte, peer, tag, this.comm, request),
        'MPI_Isend',
      );
    }
    return requests;
  }

  /** Progresses `requests` until all completed ([Note: mpi progress]); `peer`: who is awaited. */
  private async complete(requests: BigUint64Array, peer?: number): Promise<void> {
    this.waitingPeer = peer;
    const started = performance.now();
    try {
      await this.progress(requests, started);
    } catch (error) {
      this.abandoned = true;
      throw error;
    } finally {
      this.waitingPeer = undefined;
    }
  }

  private async progress(requests: BigUint64Array, started: number): Promise<void> {
    const { flag, sleep } = this;
    for (;;) {
      const turnEnds = performance.now() + SPIN_MS;
      do {
        this.check(this.mpi.testall(requests.length, requests, flag), 'MPI_Testall');
        if (flag[0] !== 0) return;
        this.checkAbortNotice();
        if (this.isBroken() || Atomics.load(this.init.abort, 0) === 1) {
          // The base already failed the op (timeout, abort); MPI cannot cancel a collective.
          throw new CollectiveError('the op was abandoned with its MPI requests in flight', {
            code: 'closed',
          });
        }
        if (performance.now() - started > BUSY_MS) Atomics.wait(sleep, 0, 0, IDLE_SLEEP_MS);
      } while (performance.now() < turnEnds);
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** The peer whose header has not arrived, else the peer of a running send/recv. */
  protected override waitingOn(): number | undefined {
    for (let peer = 0; peer < this.headerRequests.length; peer++) {
      const request = this.headerRequests[peer];
      if (request === null || request === undefined) continue;
      if (this.mpi.test(request, this.flag, this.status) === 0 && this.flag[0] === 0) return peer;
    }
    return this.waitingPeer;
  }

  /** [Note: failure agreement]: the notice where the next header belongs, one reply from each peer. */
  protected override async collectNotices(
    notice: FailureNotice,
    _op: OpMessage,
    judge: (peer: number, reply: NoticeReply) => string | undefined,
  ): Promise<string | undefined> {
    const peers = this.peers();
    const sends = this.sendRequests(peers, this.encode({ notice }));
    const received = await this.receiveFrom(peers);
    await this.complete(sends);
    for (const peer of peers) {
      const message = this.decode(received[peer]!);
      const reply: NoticeReply =
        'notice' in message
          ? { type: 'notice', notice: message.notice }
          : { type: 'op', header: (message as { header: OpHeader }).header };
      const reason = judge(peer, reply);
      if (reason !== undefined) return reason;
    }
    return undefined;
  }

  protected override sendAbort(message: string): void {
    const bytes = this.encode({ abort: { rank: this.init.rank, message } });
    const peers = this.peers();
    const requests = this.sendRequests(peers, bytes, ABORT_TAG);
    this.sent.push({ request: requests, bytes });
  }

  /** MPI cannot close a peer's view of this rank: peers fail at their own timeouts (or mpirun ends the job). */
  protected override closeTransport(): void {}

  close(): void {
    if (this.closed) return;
    this.closed = true;
    // A receive still posted (no abort arrived) is cancelled; a completed one is MPI_REQUEST_NULL.
    if (this.mpi.test(this.abortRequest, this.flag, this.status) === 0 && this.flag[0] === 0) {
      this.mpi.cancel(this.abortRequest);
      this.mpi.requestFree(this.abortRequest);
    }
    if (!this.abandoned && this.sent.length === 0) this.mpi.commFree(this.comm);
  }

  private postAbortReceive(): void {
    this.check(
      this.mpi.irecv(
        this.abortMessage,
        MESSAGE_BYTES,
        this.mpi.handles.byte,
        MPI_ANY_SOURCE,
        ABORT_TAG,
        this.comm,
        this.abortRequest,
      ),
      'MPI_Irecv',
    );
  }

  /** Throws the abort error once a peer's abort notice has arrived ([Note: abort]). */
  private checkAbortNotice(): void {
    if (this.isBroken()) return;
    this.check(this.mpi.test(this.abortRequest, this.flag, this.status), 'MPI_Test');
    if (this.flag[0] === 0) return;
    const message = this.decode(this.abortMessage);
    if ('abort' in message) throw this.peerAborted(message.abort.rank, message.abort.message);
  }

  private headerOf(peer: number, bytes: Uint8Array): OpHeader {
    const message = this.decode(bytes);
    if ('notice' in message) throw this.peerAborted(peer, message.notice.message);
    if (!('header' in message))
      throw new CollectiveError(`rank ${peer} sent no op header`, { code: 'malformed-frame', peer });
    return message.header;
  }

  private encode(message: Message): Uint8Array {
    const bytes = new TextEncoder().encode(JSON.stringify(message));
    if (bytes.length <= MESSAGE_BYTES) return bytes;
    // Only a notice's free text can be this long: keep its start.
    return this.encode(truncated(message));
  }

  private decode(bytes: Uint8Array): Message {
    const end = bytes.indexOf(0);
    return JSON.parse(new TextDecoder().decode(end < 0 ? bytes : bytes.subarray(0, end))) as Message;
  }

  private peers(): number[] {
    return Array.from({ length: this.init.size }, (_, peer) => peer).filter(
      (peer) => peer !== this.init.rank,
    );
  }

  private check(code: number, call: string): void {
    if (code === 0) return;
    throw new CollectiveError(
      `${call} failed on rank ${this.init.rank}: ${this.mpi.errorString(code)} (MPI error ${code}).`,
      {
        code: 'closed',
        rank: this.init.rank,
        fix: 'MPI reported an error; see its message above (mpirun prints more with --mca btl_base_verbose 1).',
      },
    );
  }
}

function truncated(message: Message): Message {
  if ('notice' in message)
    return { notice: { ...message.notice, message: message.notice.message.slice(0, 1000) } };
  if ('abort' in message)
    return { abort: { ...message.abort, message: message.abort.message.slice(0, 1000) } };
  return message;
}

/** bfloat16 bits as float32 values (a scratch copy the reduction runs on). */
function widen(bits: Uint16Array): Float32Array {
  const values = new Float32Array(bits.length);
  decodeBfloat16(bits, values);
  return values;
}

function scratchLike(values: Float32Array | Int32Array, length: number): Float32Array | Int32Array {
  return values instanceof Int32Array ? new Int32Array(length) : new Float32Array(length);
}

function overlaps(a: ArrayBufferView, b: ArrayBufferView): boolean {
  return (
    a.buffer === b.buffer &&
    a.byteOffset < b.byteOffset + b.byteLength &&
    b.byteOffset < a.byteOffset + a.byteLength
  );
}

/** Whether `block` is rank `rank`'s block of `whole` (in-place all-gather). */
function isBlock(whole: CollectiveBuffer, block: CollectiveBuffer, rank: number): boolean {
  return (
    whole.buffer === block.buffer &&
    block.byteOffset === whole.byteOffset + rank * block.byteLength &&
    block.length > 0
  );
}

export function createEngine(init: EngineInit, context: EngineContext): MpiEngine {
  return new MpiEngine(init as MpiInit, context);
}
