import { decodeBfloat16, encodeBfloat16, roundToBfloat16InPlace } from '@fsdp-ts/kernels';
import { CollectiveError } from '../errors.js';
import type {
  EngineContext,
  EngineInit,
  FailureNotice,
  NoticeReply,
} from '../internal/engine/engine-base.js';
import { EngineBase, expectedSendHeader, type OpHeader, sameOp } from '../internal/engine/engine-base.js';
import type { OpMessage } from '../internal/op-message.js';
import type { CollectiveBuffer } from '../types.js';
import { loadMpiLibrary, MPI_ANY_SOURCE, type MpiLibrary } from './mpi-library.js';

/** The bytes each in-flight send reads, kept alive by its requests array ([Note: send buffers outlive their requests]). */
const sendBuffers = new WeakMap<BigUint64Array, Uint8Array>();

export interface MpiInit extends EngineInit {
  koffiPath: string;
  libraryPath: string;
  worldRanks: number[];
  /** MPI_Comm_create_group's tag: tells apart groups created at the same time. */
  tag: number;
}

const HEADER_TAG = 1;
const PAYLOAD_TAG = 2;
const ABORT_TAG = 3;
/** send/recv headers: their own stream, as are their sequence numbers. */
const PEER_HEADER_TAG = 4;
/** Bytes of one header, failure notice or abort notice (JSON, zero-padded). */
const MESSAGE_BYTES = 4096;
/**
 * [Note: mpi progress] MPI moves bytes only inside MPI calls (Open MPI has no progress thread), so
 * an op's requests are tested back to back for SPIN_MS, then the event loop gets a turn (timeouts,
 * abort and destroy); after BUSY_MS the worker sleeps IDLE_SLEEP_MS between tests, leaving the core
 * to the main thread while a peer computes.
 */
const SPIN_MS = 2;
const BUSY_MS = 50;
const IDLE_SLEEP_MS = 0.1;

type Message =
  | { header: OpHeader }
  | { notice: FailureNotice }
  | { abort: { rank: number; message: string } };

/**
 * [Note: mpi engine] One communicator per group (MPI_Comm_create_group over the group's world
 * ranks); every op is non-blocking: the op header to and from every peer first (HEADER_TAG, so a
 * mismatch fails before any payload and a peer that never issues the op is named), then the MPI
 * collective or MPI_Isend/MPI_Irecv (PAYLOAD_TAG), progressed by MPI_Test ([Note: mpi progress]).
 * Abort notices travel on ABORT_TAG, received from any source while the group lives. bfloat16
 * ([Note: mpi bfloat16]): gathers and broadcasts move 16-bit values; reductions run in float32.
 */
class MpiEngine extends EngineBase<MpiInit> {
  private readonly mpi: MpiLibrary;
  private readonly comm = new BigUint64Array(1);
  private readonly flag = new Int32Array(1);
  private readonly status = new Int32Array(8);
  private readonly sleep = new Int32Array(new SharedArrayBuffer(4));
  private readonly abortRequest = new BigUint64Array(1);
  private readonly abortMessage = new Uint8Array(MESSAGE_BYTES);
  /** Kept alive until the group closes (MPI reads them later). */
  private readonly sent: { request: BigUint64Array; bytes: Uint8Array }[] = [];
  private headerRequests: (BigUint64Array | null)[] = [];
  private waitingPeer: number | undefined;
  /** Requests left in flight (timeout, abort): the communicator cannot be freed. */
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

  private async exchangeHeaders(op: OpMessage, mine: OpHeader): Promise<void> {
    const peers = this.peers();
    if (peers.length === 0) return;
    const sends = this.sendRequests(peers, this.encode({ header: mine }));
    const received = await this.receiveFrom(peers);
    await this.complete(sends);
    const headers = received.map((bytes, peer) => (bytes === null ? null : this.headerOf(peer, bytes)));
    this.checkHeaders(op, mine, headers);
  }

  private async mpiCall(
    call: string,
    start: (request: BigUint64Array) => number,
    peer?: number,
  ): Promise<void> {
    const request = new BigUint64Array(1);
    this.check(start(request), call);
    await this.complete(request, peer);
  }

  private elementType(op: OpMessage): unknown {
    const { uint16, int, float } = this.mpi.handles;
    return op.dtype === 'bfloat16' ? uint16 : op.dtype === 'int32' ? int : float;
  }

  private async collective(op: OpMessage): Promise<void> {
    const { mpi, comm } = this;
    const { float, int, uint16, sum, max, min } = mpi.handles;
    const { count, root } = op;
    const reduction = op.reduceOp === 'max' ? max : op.reduceOp === 'min' ? min : sum;
    const size = this.init.size;
    const wire = op.wireDtype === 'bfloat16';
    // [Note: mpi bfloat16] Reductions run in float32: bfloat16 buffers are widened to a scratch,
    // float32 ones with bfloat16 on the wire are rounded before and after (as if they crossed it).
    const reducedAs = (buffer: CollectiveBuffer) =>
      (buffer instanceof Uint16Array ? widen(buffer) : buffer) as Float32Array | Int32Array;
    const finish = (values: Float32Array | Int32Array, into: CollectiveBuffer) => {
      if (op.reduceOp === 'avg') for (let index = 0; index < values.length; index++) values[index]! /= size;
      if (into instanceof Uint16Array) encodeBfloat16(values as Float32Array, into);
      else {
        if (wire) roundToBfloat16InPlace(values as Float32Array);
        if (values !== into) into.set(values);
      }
    };
    const type = op.dtype === 'int32' ? int : float;
    const input = op.input!;
    const output = op.output!;
    switch (op.kind) {
      case 'barrier':
        return this.mpiCall('MPI_Ibarrier', (request) => mpi.ibarrier(comm, request));
      case 'allReduce': {
        const values = reducedAs(output);
        if (wire) roundToBfloat16InPlace(values as Float32Array);
        await this.mpiCall('MPI_Iallreduce', (request) =>
          mpi.iallreduce(null, values, count, type, reduction, comm, request),
        );
        return finish(values, output);
      }
      case 'reduceScatter': {
        const values = wire ? Float32Array.from(input as Float32Array) : reducedAs(input);
        if (wire) roundToBfloat16InPlace(values as Float32Array);
        // MPI forbids aliased buffers; in place (output inside input) reduces into a scratch.
        const target =
          output instanceof Uint16Array || overlaps(input, output) ? scratchLike(values, count) : output;
        await this.mpiCall('MPI_Ireduce_scatter_block', (request) =>
          mpi.ireduceScatterBlock(values, target, count, type, reduction, comm, request),
        );
        return finish(target as Float32Array | Int32Array, output);
      }
      case 'allGather': {
        if (wire) {
          const bits = new Uint16Array(count);
          encodeBfloat16(input as Float32Array, bits);
          const gathered = new Uint16Array(count * size);
          await this.mpiCall('MPI_Iallgather', (request) =>
            mpi.iallgather(bits, count, uint16, gathered, comm, request),
          );
          return decodeBfloat16(gathered, output as Float32Array);
        }
        const mine = isBlock(output, input, this.init.rank) ? null : input;
        return this.mpiCall('MPI_Iallgather', (request) =>
          mpi.iallgather(mine, count, this.elementType(op), output, comm, request),
        );
      }
      case 'broadcast': {
        if (!wire)
          return this.mpiCall('MPI_Ibcast', (request) =>
            mpi.ibcast(output, count, this.elementType(op), root, comm, request),
          );
        const bits = new Uint16Array(count);
        if (this.init.rank === root) encodeBfloat16(output as Float32Array, bits);
        await this.mpiCall('MPI_Ibcast', (request) => mpi.ibcast(bits, count, uint16, root, comm, request));
        return decodeBfloat16(bits, output as Float32Array);
      }
      default:
        throw new Error(`the mpi engine has no schedule for ${op.kind}`);
    }
  }

  private sendRecv(op: OpMessage, direction: 'send' | 'recv'): Promise<void> {
    const { mpi, comm } = this;
    const type = this.elementType(op);
    return direction === 'send'
      ? this.mpiCall(
          'MPI_Isend',
          (request) => mpi.isend(op.input, op.count, type, op.peer, PAYLOAD_TAG, comm, request),
          op.peer,
        )
      : this.mpiCall(
          'MPI_Irecv',
          (request) => mpi.irecv(op.output, op.count, type, op.peer, PAYLOAD_TAG, comm, request),
          op.peer,
        );
  }

  /** One message from each of `peers`, by group rank (null for the others). */
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
    // [Note: send buffers outlive their requests] MPI reads `bytes` until the send completes,
    // and koffi passes only its address: nothing else keeps the array alive, so a collected
    // array's memory could be reused while the send is in flight (a header arrived as invalid
    // JSON on links whose connection opened at that first send). The requests hold it.
    sendBuffers.set(requests, bytes);
    for (const [index, peer] of list.entries()) {
      const request = requests.subarray(index, index + 1);
      this.check(
        this.mpi.isend(bytes, bytes.length, this.mpi.handles.byte, peer, tag, this.comm, request),
        'MPI_Isend',
      );
    }
    return requests;
  }

  /** [Note: mpi progress]; `peer`: who is awaited. */
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

  protected override waitingOn(): number | undefined {
    for (let peer = 0; peer < this.headerRequests.length; peer++) {
      const request = this.headerRequests[peer];
      if (request === null || request === undefined) continue;
      if (this.mpi.test(request, this.flag, this.status) === 0 && this.flag[0] === 0) return peer;
    }
    return this.waitingPeer;
  }

  /** [Note: failure agreement] */
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

  /** MPI cannot close a peer's view of this rank: peers fail at their own timeouts. */
  protected override closeTransport(): void {}

  close(): void {
    if (this.closed) return;
    this.closed = true;
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
