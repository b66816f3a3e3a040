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

/** Eager bytes announced when the rest runs natively: enough to start the pipeline, few enough for the kernel. */
const NATIVE_EAGER_BYTES = 256 * 1024;

export interface NativeOpContext {
  rank: number;
  size: number;
  links: readonly (PeerLink | null)[];
  sockets: NativeSockets;
  scratch: RingScratch;
  abort: Int32Array;
  reduce: NativeReduce;
  counters: Int32Array | undefined;
  /** Reads a notice found where a header belongs, and throws its error. */
  frames: NodeNetFrames;
  /** The group broke or the engine closed: a running exchange or ring stops. */
  stopped(): boolean;
  checkHeaders(op: OpMessage, mine: OpHeader, headers: readonly (OpHeader | null)[]): void;
}

/** Ring ops over plain sockets, headers and bytes through libc ([Note: native data path]). */
export class NativeOpPath {
  #receive: Uint8Array | undefined;
  #run: NativeRingRun | undefined;
  #exchange: NativeHeaderExchange | undefined;

  constructor(private readonly context: NativeOpContext) {}

  usable(): boolean {
    const { links, rank, size } = this.context;
    if (size < 2) return false;
    return links.every((link, peer) => peer === rank || link?.fd() !== undefined);
  }

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

  /** What the exchange did not hand to the kernel, through node:net. */
  #writeUnsent(exchange: NativeHeaderExchange): void {
    for (const link of this.context.links)
      if (link !== null) for (const bytes of exchange.takeUnsent(link)) link.write(bytes);
  }

  /** `late` goes out first. */
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
  /** Ended after their header was complete (not polled for it again). */
  private readonly endedAfterHeader = new Set<PeerLink>();
  private readonly polls: PollSet;
  /** A peer whose first bytes are a notice, for node:net to read. */
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

  headers(): (Uint8Array | null)[] {
    return this.received;
  }

  takeUnsent(link: PeerLink): Uint8Array[] {
    const outgoing = this.outgoing.get(link);
    this.outgoing.delete(link);
    return outgoing?.take() ?? [];
  }

  waitingOn(): number | undefined {
    const index = this.filled.findIndex(
      (count, peer) => this.received[peer] !== null && count < HEADER_BYTES,
    );
    return index >= 0 ? index : undefined;
  }

  /** 'done' once every header is in and out (the next rank's eager bytes may still be queued). */
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

  private complete(): boolean {
    for (const [peer, header] of this.received.entries())
      if (header !== null && this.filled[peer]! < HEADER_BYTES) return false;
    for (const [link, outgoing] of this.outgoing) if (link !== this.next && outgoing.pending()) return false;
    return true;
  }

  /** Header bytes node:net queued before the op; the rest goes back for the ring. True at a notice. */
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

  /** A notice or goodbye where a header belongs goes back to the link's queue. */
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

  /** Waits for bytes, room or trouble; returns a link that reset. */
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
      // An end before the header is complete is recv's to meet; after it, the ring's to judge.
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

/** Test hook: ops whose headers moved natively, and mismatches among them. */
export function nativeHeaderCounts(): { exchanges: number; mismatches: number } {
  const buffer = tcpCounters();
  return {
    exchanges: Atomics.load(buffer, COUNTER.headerExchanges),
    mismatches: Atomics.load(buffer, COUNTER.headerMismatches),
  };
}
