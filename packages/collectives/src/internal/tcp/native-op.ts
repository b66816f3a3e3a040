import { type OpHeader, sameOp } from '../engine/engine-base.js';
import type { OpMessage } from '../op-message.js';
import {
  abortMessageLength,
  decodeHeader,
  eagerBytesIn,
  encodeHeader,
  failureNoticeLength,
  goodbyeHeader,
  HEADER_BYTES,
  lossNoticeHeader,
} from './frame-header.js';
import type { NativeReduce } from './native-blas.js';
import { driveNativeRun, NativeRingRun } from './native-ring.js';
import {
  EAGAIN,
  EINTR,
  type NativeSockets,
  POLLERR,
  POLLHUP,
  POLLIN,
  POLLOUT,
  POLLRDHUP,
  PollSet,
} from './native-sockets.js';
import type { NodeNetFrames } from './node-net-frames.js';
import type { PeerLink } from './peer-link.js';
import type { RingPlan, RingScratch } from './ring.js';
import { drainInto } from './tcp-failure.js';

/**
 * Eager bytes announced with the header when the rest of the op runs natively: enough to start
 * the pipeline, small enough for the kernel to take at once ([Note: native data path]).
 */
const NATIVE_EAGER_BYTES = 256 * 1024;

/** What a native op needs from its engine. */
export interface NativeOpContext {
  rank: number;
  size: number;
  links: readonly (PeerLink | null)[];
  sockets: NativeSockets;
  scratch: RingScratch;
  abort: Int32Array;
  /** OpenBLAS's in-place add for reduce steps ([Note: blas reduce steps]). */
  reduce: NativeReduce;
  /** Native header exchanges and their mismatches, shared with the main thread. */
  headerCounts: Int32Array | undefined;
  /** Reads a notice that came where a header was expected, and throws its error. */
  frames: NodeNetFrames;
  /** Whether the group broke or the engine closed: a running exchange or ring stops. */
  stopped(): boolean;
  /** Compares this op's header with every peer's; throws 'mismatch' on a difference. */
  checkHeaders(op: OpMessage, mine: OpHeader, headers: readonly (OpHeader | null)[]): void;
}

/**
 * The native data path of a tcp engine ([Note: native data path]): ring ops whose links are all
 * plain sockets exchange their headers and move their bytes through libc. Owns what such an op
 * keeps between calls: the receive buffer, and the exchange or ring run in progress (which peer
 * it waits on).
 */
export class NativeOpPath {
  #receive: Uint8Array | undefined;
  #run: NativeRingRun | undefined;
  #exchange: NativeHeaderExchange | undefined;

  constructor(private readonly context: NativeOpContext) {}

  /** Whether an op can run on the native data path: every link is a plain socket. */
  usable(): boolean {
    const { links, rank, size } = this.context;
    if (size < 2) return false;
    return links.every((link, peer) => peer === rank || link?.fd() !== undefined);
  }

  /** The peer the running exchange or ring waits on, if any. */
  waitingOn(): number | undefined {
    return this.#exchange?.waitingOn() ?? this.#run?.waitingOn();
  }

  /**
   * A ring op on the native data path: headers and eager bytes through libc ([Note: native
   * header exchange]), then the ring plan's bytes ([Note: native data path]). Every link's
   * node:net reading is held for the whole op ([Note: held reading]).
   */
  async execute(
    op: OpMessage,
    header: OpHeader,
    ring: { plan: RingPlan; after?: () => void },
    eager: Uint8Array | null,
    previous: PeerLink,
    next: PeerLink,
  ): Promise<void> {
    const { links } = this.context;
    for (const link of links) link?.holdReading();
    try {
      // node:net's writes of earlier ops (a mismatch's eager bytes, say) reach the kernel first.
      for (const link of links) if (link !== null) await link.flushed();
      const announced = Math.min(eager?.length ?? 0, NATIVE_EAGER_BYTES);
      const frames = new Map<PeerLink, Uint8Array[]>();
      for (const link of links) {
        if (link === null) continue;
        const frame: Uint8Array[] = [encodeHeader(header, link === next ? announced : 0)];
        if (link === next && eager !== null) frame.push(eager.subarray(0, announced));
        frames.set(link, frame);
      }
      const { sockets, abort } = this.context;
      const exchange = new NativeHeaderExchange(links, next, sockets, frames, abort);
      this.#exchange = exchange;
      try {
        await driveNativeRun(exchange, links, () => this.context.stopped());
      } finally {
        this.#exchange = undefined;
      }
      if (exchange.notice !== undefined) {
        // A failing rank waits for this rank's header to see that it did not fail alike
        // ([Note: failure agreement]): the header goes out before the notice is read.
        this.#writeUnsent(exchange);
        for (const link of links) link?.releaseReading();
        // Throws the notice's error (an abort, or a peer's loss).
        await this.context.frames.readFrame(exchange.notice);
      }
      const received = exchange
        .headers()
        .map((bytes, peer) =>
          bytes === null ? null : { header: decodeHeader(bytes, peer), eagerBytes: eagerBytesIn(bytes) },
        );
      const headers = received.map((frame) => frame?.header ?? null);
      const mismatched = headers.some((theirs) => theirs !== null && !sameOp(header, theirs));
      countNativeHeaders(this.context.headerCounts, mismatched);
      if (mismatched) {
        // Every byte a header announced must arrive, and every announced byte is skipped.
        this.#writeUnsent(exchange);
        for (const link of links) link?.releaseReading();
        await this.context.frames.skipEager(received);
        this.context.checkHeaders(op, header, headers);
      }
      const late = exchange.takeUnsent(next);
      if (eager !== null && announced < eager.length) late.push(eager.subarray(announced));
      await this.#runRing(ring.plan, previous, next, late);
    } finally {
      for (const link of links) link?.releaseReading();
    }
    ring.after?.();
  }

  /** What a header exchange did not hand to the kernel, through node:net (after the kernel's bytes). */
  #writeUnsent(exchange: NativeHeaderExchange): void {
    for (const link of this.context.links)
      if (link !== null) for (const bytes of exchange.takeUnsent(link)) link.write(bytes);
  }

  /** A ring plan's bytes through libc ([Note: native data path]); `late` goes out first. */
  async #runRing(
    plan: RingPlan,
    previous: PeerLink,
    next: PeerLink | null,
    late: Uint8Array[],
  ): Promise<void> {
    const { links, sockets, scratch, abort, reduce } = this.context;
    this.#receive ??= new Uint8Array(1 << 20);
    const run = new NativeRingRun(
      plan,
      previous,
      next,
      links,
      sockets,
      scratch,
      this.#receive,
      abort,
      reduce,
    );
    for (const bytes of late) run.queueSend(bytes);
    this.#run = run;
    try {
      await driveNativeRun(run, links, () => this.context.stopped());
    } finally {
      this.#run = undefined;
    }
  }
}

/** poll(2) timeout while waiting for headers: long enough to sleep, short enough for the slice. */
const POLL_MS = 20;

/** Bytes still to go to one peer, in order. */
interface Outgoing {
  chunks: Uint8Array[];
  offset: number;
}

/**
 * [Note: native header exchange]
 * On the native data path ([Note: native data path]) an op's header frames move through libc
 * too: this rank sends its 32-byte header to every peer (to the next rank followed by the eager
 * bytes the header announces) and receives exactly the 32 header bytes of every peer, first from
 * what node:net queued before the op, then with recv(2), never more: the peer's eager bytes stay
 * in the kernel (or the link's queue) for the ring. The bytes on the wire are exactly those of the
 * node:net exchange ([Note: eager first segment]), so the two paths interoperate and a mismatch
 * is handled as before: the engine compares the headers; on a difference the bytes this rank has
 * not yet handed to the kernel go out through node:net (a peer skips every byte its header
 * announced, so they must all arrive), and every peer's announced eager bytes are skipped through
 * node:net, so the streams stay aligned. Before the check nothing but the header and the
 * announced eager bytes is sent. Only ring ops exchange headers this way (their bytes move
 * natively anyway); a barrier, a direct all-reduce and send/recv keep node:net: a header-only
 * exchange measured no cheaper through libc (koffi calls, poll, pausing and resuming every link
 * cost what node:net's event-loop turn does).
 * Every link's node:net reading is held for the whole op ([Note: held reading]), so only the
 * bytes node:net read between ops come through its queue. The first 32 bytes from a peer may be
 * an abort or a loss notice instead of a header: they go back to the link's queue and the engine
 * reads the notice through node:net, as before. A hang-up (a reset, or the end of the stream
 * before the header is complete) fails the link at once, naming its peer; the end of a stream
 * after its header is left to the ring, which first reads what the peer sent before it ended.
 * Slices and yields are the ring run's (driveNativeRun): timers, the main thread's messages and
 * the abort word are seen while a rank waits for a slow peer's header.
 */
export class NativeHeaderExchange {
  private readonly received: (Uint8Array | null)[];
  private readonly filled: number[];
  private readonly outgoing = new Map<PeerLink, Outgoing>();
  /** Links whose end of stream was seen after their header was complete (not polled for it again). */
  private readonly endedAfterHeader = new Set<PeerLink>();
  private readonly polls: PollSet;
  /** A peer whose first bytes are an abort or loss notice, for the engine to read through node:net. */
  notice: PeerLink | undefined;

  constructor(
    private readonly links: readonly (PeerLink | null)[],
    private readonly next: PeerLink | null,
    private readonly sockets: NativeSockets,
    frames: Map<PeerLink, Uint8Array[]>,
    private readonly abort: Int32Array,
  ) {
    this.received = links.map((link) => (link === null ? null : new Uint8Array(HEADER_BYTES)));
    this.filled = links.map(() => 0);
    for (const [link, chunks] of frames)
      this.outgoing.set(link, { chunks: chunks.filter((chunk) => chunk.length > 0), offset: 0 });
    this.polls = new PollSet(links.length + 1);
  }

  /** Each peer's 32 header bytes (null for this rank), once `run` returned 'done' without a notice. */
  headers(): (Uint8Array | null)[] {
    return this.received;
  }

  /** What has not reached the kernel yet for `link`, in order (its queue is emptied). */
  takeUnsent(link: PeerLink): Uint8Array[] {
    const outgoing = this.outgoing.get(link);
    if (outgoing === undefined) return [];
    this.outgoing.delete(link);
    const [head, ...rest] = outgoing.chunks;
    if (head === undefined) return [];
    return [head.subarray(outgoing.offset), ...rest].filter((chunk) => chunk.length > 0);
  }

  /** The peer this exchange waits on (for timeout messages). */
  waitingOn(): number | undefined {
    const index = this.filled.findIndex(
      (count, peer) => this.received[peer] !== null && count < HEADER_BYTES,
    );
    return index >= 0 ? index : undefined;
  }

  /**
   * Moves header bytes until every peer's header is in and every header sent to a peer other
   * than the next rank has reached the kernel ('done'; the next rank's eager bytes may still be
   * queued), or the event loop must run ('yield').
   */
  run(sliceMs: number): 'done' | 'yield' {
    const started = performance.now();
    if (this.takeQueuedHeaders()) return 'done';
    const { sockets } = this;
    for (;;) {
      let progressed = false;
      for (const [link, outgoing] of this.outgoing) {
        const sent = this.pump(link, outgoing);
        if (sent === 'lost') return 'yield';
        progressed ||= sent === 'progress';
      }
      for (const [peer, link] of this.links.entries()) {
        const header = this.received[peer];
        if (link === null || header == null || this.filled[peer]! === HEADER_BYTES) continue;
        const fd = link.fd();
        if (fd === undefined) {
          // Departed with its header still missing: nothing more comes ([Note: clean departure]).
          link.failDeparted();
          return 'yield';
        }
        const count = sockets.recv(
          fd,
          header.subarray(this.filled[peer]!),
          HEADER_BYTES - this.filled[peer]!,
        );
        if (count > 0) {
          this.filled[peer]! += count;
          progressed = true;
          if (this.filled[peer] === HEADER_BYTES && this.isNotice(link, header)) return 'done';
          continue;
        }
        if (count === 0) return this.lost(link, undefined);
        const error = sockets.errno();
        if (error !== EAGAIN && error !== EINTR) return this.lost(link, error);
      }
      if (this.complete()) return 'done';
      if (progressed) continue;
      if (Atomics.load(this.abort, 0) !== 0 || performance.now() - started > sliceMs) return 'yield';
      const troubled = this.poll();
      if (troubled !== undefined) return this.lost(troubled, undefined);
    }
  }

  /** Every header in, and nothing but the next rank's bytes still to send. */
  private complete(): boolean {
    for (const [peer, header] of this.received.entries())
      if (header !== null && this.filled[peer]! < HEADER_BYTES) return false;
    for (const [link, outgoing] of this.outgoing)
      if (link !== this.next && outgoing.chunks.length > 0) return false;
    return true;
  }

  /**
   * Header bytes node:net queued before the op (a faster peer's frame, read between ops): taken
   * up to each header's end, the rest put back for the ring. True when a notice was found.
   */
  private takeQueuedHeaders(): boolean {
    for (const [peer, link] of this.links.entries()) {
      const header = this.received[peer];
      if (link === null || header == null || this.filled[peer]! === HEADER_BYTES) continue;
      const queued = link.takeQueued();
      const rest: Uint8Array[] = [];
      for (const chunk of queued) {
        const take = Math.min(HEADER_BYTES - this.filled[peer]!, chunk.length);
        header.set(chunk.subarray(0, take), this.filled[peer]!);
        this.filled[peer]! += take;
        if (take < chunk.length) rest.push(chunk.subarray(take));
      }
      if (rest.length > 0) link.requeue(rest);
      if (this.filled[peer] === HEADER_BYTES && this.isNotice(link, header)) return true;
    }
    return false;
  }

  /**
   * An abort, loss or failure notice ([Note: failure agreement]), or a goodbye ([Note: clean
   * departure]), where a header belongs: back to the link's queue for the engine.
   */
  private isNotice(link: PeerLink, header: Uint8Array): boolean {
    if (
      abortMessageLength(header) === undefined &&
      lossNoticeHeader(header) === undefined &&
      failureNoticeLength(header) === undefined &&
      goodbyeHeader(header) === undefined
    )
      return false;
    link.requeue([header.slice()]);
    this.notice = link;
    return true;
  }

  private pump(link: PeerLink, outgoing: Outgoing): 'progress' | 'blocked' | 'lost' {
    const fd = link.fd();
    if (fd === undefined && link.departed() !== undefined) {
      // A departed peer needs nothing more ([Note: clean departure]); its goodbye is read next.
      outgoing.chunks.length = 0;
      return 'blocked';
    }
    if (fd === undefined) return 'lost';
    let progressed = false;
    while (outgoing.chunks.length > 0) {
      const head = outgoing.chunks[0]!;
      const sent = this.sockets.send(fd, head.subarray(outgoing.offset), head.length - outgoing.offset);
      if (sent > 0) {
        progressed = true;
        outgoing.offset += sent;
        if (outgoing.offset === head.length) {
          outgoing.chunks.shift();
          outgoing.offset = 0;
        }
        continue;
      }
      const error = this.sockets.errno();
      if (sent < 0 && (error === EAGAIN || error === EINTR)) break;
      this.lost(link, sent < 0 ? error : undefined);
      return 'lost';
    }
    return progressed ? 'progress' : 'blocked';
  }

  /**
   * Waits for header bytes, room to send, or trouble; returns a link that reset, or whose stream
   * ended before its header was complete (after recv found nothing more on it).
   */
  private poll(): PeerLink | undefined {
    const { polls } = this;
    const polled: PeerLink[] = [];
    let count = 0;
    for (const [peer, link] of this.links.entries()) {
      const fd = link?.fd();
      if (link === null || fd === undefined) continue;
      const waitingHeader = this.received[peer] !== null && this.filled[peer]! < HEADER_BYTES;
      let events = this.endedAfterHeader.has(link) ? 0 : POLLRDHUP;
      if (waitingHeader) events |= POLLIN;
      if ((this.outgoing.get(link)?.chunks.length ?? 0) > 0) events |= POLLOUT;
      polls.set(count++, fd, events);
      polled.push(link);
    }
    const ready = this.sockets.poll(polls.buffer, count, POLL_MS);
    if (ready <= 0) return undefined;
    for (let index = 0; index < count; index++) {
      const revents = polls.revents(index);
      const link = polled[index]!;
      if ((revents & (POLLERR | POLLHUP)) !== 0) return link;
      // The end of a stream: recv reads what is left of a pending header, then meets the end; a
      // stream that ends after its header is the ring's to drain and judge.
      if ((revents & POLLRDHUP) !== 0 && this.filled[link.peer]! === HEADER_BYTES)
        this.endedAfterHeader.add(link);
    }
    return undefined;
  }

  /** As NativeRingRun's `lost`: what is left on the connection is queued, and the link fails. */
  private lost(link: PeerLink, errno: number | undefined): 'yield' {
    const fd = link.fd();
    if (fd !== undefined) drainInto(link, fd, this.sockets);
    link.lostNatively(errno);
    return 'yield';
  }
}

/**
 * How many ops exchanged their headers on the native path, and how many of those found a
 * mismatch, per process (every tcp group of it): a SharedArrayBuffer the main thread posts to
 * each tcp communication worker. An internal diagnostic, not API: the tests read it
 * (nativeHeaderCounts) to prove which path ran.
 */
let counts: Int32Array | undefined;

export function nativeHeaderCountBuffer(): Int32Array {
  counts ??= new Int32Array(new SharedArrayBuffer(8));
  return counts;
}

export function countNativeHeaders(buffer: Int32Array | undefined, mismatched: boolean): void {
  if (buffer === undefined) return;
  Atomics.add(buffer, 0, 1);
  if (mismatched) Atomics.add(buffer, 1, 1);
}

/** Ops whose headers moved natively, and mismatches found among them, in this process. */
export function nativeHeaderCounts(): { exchanges: number; mismatches: number } {
  const buffer = nativeHeaderCountBuffer();
  return { exchanges: Atomics.load(buffer, 0), mismatches: Atomics.load(buffer, 1) };
}
