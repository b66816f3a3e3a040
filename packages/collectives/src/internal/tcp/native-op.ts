import { type OpHeader, sameOp } from '../engine/engine-base.js';
import type { OpMessage } from '../op-message.js';
import { decodeHeader, eagerBytesIn, encodeHeader, HEADER_BYTES, isNoticeHeader } from './frame-header.js';
import type { NativeReduce } from './native-blas.js';
import { driveNativeRun, NativeRingRun, SendQueue } from './native-ring.js';
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
import { COUNTER, count, tcpCounters } from './tcp-connections.js';
import { loseNatively } from './tcp-failure.js';

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
  /** The process's tcp counters (tcpCounters in tcp-connections.ts). */
  counters: Int32Array | undefined;
  /** Reads a notice that came where a header was expected, and throws its error. */
  frames: NodeNetFrames;
  /** Whether the group broke or the engine closed: a running exchange or ring stops. */
  stopped(): boolean;
  /** Compares this op's header with every peer's; throws 'mismatch' on a difference. */
  checkHeaders(op: OpMessage, mine: OpHeader, headers: readonly (OpHeader | null)[]): void;
}

/**
 * The native data path of a tcp engine ([Note: native data path]): ring ops whose links are all
 * plain sockets exchange their headers and move their bytes through libc. Owns the receive
 * buffer and the exchange or ring run in progress.
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

  /** Headers and eager bytes ([Note: native header exchange]), then the ring plan's bytes; reading held throughout ([Note: held reading]). */
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
      count(this.context.counters, COUNTER.headerExchanges);
      if (mismatched) count(this.context.counters, COUNTER.headerMismatches);
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

/**
 * [Note: native header exchange]
 * A ring op on the native path sends its 32-byte header to every peer (to the next rank followed
 * by the eager bytes it announces) and receives exactly each peer's 32 header bytes, first from
 * what node:net queued before the op, then with recv(2); the peers' eager bytes stay for the
 * ring. The bytes on the wire are the node:net exchange's ([Note: eager first segment]), so the
 * two paths interoperate. On a mismatch what this rank has not handed to the kernel goes out
 * through node:net and every peer's announced eager bytes are skipped there, so the streams stay
 * aligned. Barriers, direct all-reduces and send/recv keep node:net. A peer's first 32 bytes may
 * be a notice instead of a header: they go back to the link's queue for node:net to read. A
 * hang-up before a header is complete fails the link at once; an end after it is the ring's.
 */
export class NativeHeaderExchange {
  private readonly received: (Uint8Array | null)[];
  private readonly filled: number[];
  private readonly outgoing = new Map<PeerLink, SendQueue>();
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
    for (const [link, chunks] of frames) {
      const queue = new SendQueue();
      for (const chunk of chunks) queue.push(chunk);
      this.outgoing.set(link, queue);
    }
    this.polls = new PollSet(links.length + 1);
  }

  /** Each peer's 32 header bytes (null for this rank), once `run` returned 'done' without a notice. */
  headers(): (Uint8Array | null)[] {
    return this.received;
  }

  /** What has not reached the kernel yet for `link`, in order (its queue is emptied). */
  takeUnsent(link: PeerLink): Uint8Array[] {
    const outgoing = this.outgoing.get(link);
    this.outgoing.delete(link);
    return outgoing?.take() ?? [];
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
    for (const [link, outgoing] of this.outgoing) if (link !== this.next && outgoing.pending()) return false;
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
    if (!isNoticeHeader(header)) return false;
    link.requeue([header.slice()]);
    this.notice = link;
    return true;
  }

  private pump(link: PeerLink, outgoing: SendQueue): 'progress' | 'blocked' | 'lost' {
    const fd = link.fd();
    if (fd === undefined && link.departed() !== undefined) {
      // A departed peer needs nothing more ([Note: clean departure]); its goodbye is read next.
      outgoing.take();
      return 'blocked';
    }
    if (fd === undefined) return 'lost';
    const sent = outgoing.send(this.sockets, fd);
    if (typeof sent !== 'object') return sent;
    this.lost(link, sent.errno);
    return 'lost';
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
      if (this.outgoing.get(link)?.pending() === true) events |= POLLOUT;
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

  private lost(link: PeerLink, errno: number | undefined): 'yield' {
    loseNatively(link, errno, this.sockets);
    return 'yield';
  }
}

/** Ops whose headers moved natively, and mismatches found among them, in this process. */
export function nativeHeaderCounts(): { exchanges: number; mismatches: number } {
  const buffer = tcpCounters();
  return {
    exchanges: Atomics.load(buffer, COUNTER.headerExchanges),
    mismatches: Atomics.load(buffer, COUNTER.headerMismatches),
  };
}
