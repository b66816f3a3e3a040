import { type OpHeader, sameOp } from '../engine/op-header.js';
import type { OpMessage } from '../op-message.js';
import { decodeHeader, eagerBytesIn, encodeHeader } from './frame-header.js';
import type { NativeReduce } from './native-blas.js';
import { countNativeHeaders } from './native-header-counts.js';
import { NativeHeaderExchange } from './native-header-exchange.js';
import type { NativeProfile } from './native-profile.js';
import { driveNativeRun, NativeRingRun } from './native-ring.js';
import type { NativeSockets } from './native-sockets.js';
import type { NodeNetFrames } from './node-net-frames.js';
import type { PeerLink } from './peer-link.js';
import type { RingPlan, RingScratch } from './ring.js';

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
  profile: NativeProfile | undefined;
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
    const { links, profile } = this.context;
    for (const link of links) link?.holdReading();
    try {
      const exchangeStart = profile?.mark();
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
      const exchange = new NativeHeaderExchange(links, next, sockets, frames, abort, profile);
      this.#exchange = exchange;
      try {
        await driveNativeRun(exchange, links, () => this.context.stopped(), profile);
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
      if (exchangeStart !== undefined) profile!.add('header exchange', exchangeStart);
      if (mismatched) {
        const mismatchStart = profile?.mark();
        // Every byte a header announced must arrive, and every announced byte is skipped.
        this.#writeUnsent(exchange);
        for (const link of links) link?.releaseReading();
        await this.context.frames.skipEager(received);
        if (mismatchStart !== undefined) profile!.add('mismatch (node:net)', mismatchStart);
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
    const { links, sockets, scratch, abort, profile, reduce } = this.context;
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
      profile,
      reduce,
    );
    for (const bytes of late) run.queueSend(bytes);
    this.#run = run;
    try {
      await driveNativeRun(run, links, () => this.context.stopped(), profile);
    } finally {
      this.#run = undefined;
    }
  }
}
