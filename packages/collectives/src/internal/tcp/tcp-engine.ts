import { CollectiveError } from '../../errors.js';
import type { EngineContext, EngineInit } from '../engine/engine.js';
import { EngineBase } from '../engine/engine-base.js';
import { expectedSendHeader, type OpHeader, sameOp } from '../engine/op-header.js';
import type { MainToWorkerMessage, OpMessage } from '../op-message.js';
import {
  abortMessageIn,
  abortMessageLength,
  decodeHeader,
  eagerBytesIn,
  encodeAbortFrame,
  encodeHeader,
  encodeLossNotice,
  HEADER_BYTES,
  type LossReason,
  lossNoticeHeader,
  MAX_EAGER_BYTES,
} from './frame-header.js';
import { noticeError } from './loss-attribution.js';
import { LossBlame } from './loss-blame.js';
import { type BlasSetting, engineReduce, type NativeReduce } from './native-blas.js';
import { countNativeHeaders } from './native-header-counts.js';
import { NativeHeaderExchange } from './native-header-exchange.js';
import { type NativeProfile, nativeProfile } from './native-profile.js';
import { driveNativeRun, NativeRingRun } from './native-ring.js';
import { loadNativeSockets, type NativeSockets } from './native-sockets.js';
import { OpPreparation, type PreparedOp } from './op-preparation.js';
import { PeerLink } from './peer-link.js';
import { type RingPlan, RingScratch } from './ring.js';
import { connectPeers, PeerAcceptor } from './tcp-connections.js';
import { WorkArrays } from './work-arrays.js';

export interface TcpInit extends EngineInit {
  backend: 'tcp';
  key: string;
  secret: string;
  host: string;
  timeoutMs: number;
  /** TLS on every data connection ([Note: secure data links]). */
  secure: boolean;
  /**
   * Where koffi is installed, for the native data path ([Note: native data path]); undefined to
   * move every byte through node:net.
   */
  nativeSockets?: string;
  /** FSDP_TCP_NATIVE=1: fail the group's start when the native path cannot load. */
  nativeRequired?: boolean;
  /**
   * FSDP_TCP_BLAS ([Note: blas reduce steps]): 'auto' adds float32 sums with OpenBLAS on the
   * native path when it loads, 'required' fails the group's start when it cannot, 'off' never.
   */
  blas?: BlasSetting;
  /** Reduce steps by path, shared with the main thread (blasReduceCounts). */
  reduceCounts?: Int32Array;
  /** Native header exchanges and their mismatches, shared with the main thread (nativeHeaderCounts). */
  headerCounts?: Int32Array;
  /** The abstract socket name to listen on too ([Note: local peer sockets]); none for TCP only. */
  localName?: string;
  /** This host's identity, matched against the peers' published ones. */
  localIdentity?: string;
  /** Connections by transport, shared with the main thread (localLinkCounts). */
  linkCounts?: Int32Array;
}

/** All-reduces of at most this many bytes use the one-step direct exchange instead of the ring. */
export const DIRECT_ALL_REDUCE_BYTES = 64 * 1024;

/**
 * Eager bytes announced with the header when the rest of the op runs natively: enough to start
 * the pipeline, small enough for the kernel to take at once ([Note: native data path]).
 */
const NATIVE_EAGER_BYTES = 256 * 1024;

/** See [Note: breaking the group]. */
const PEER_LOSS_CLOSE_DELAY_MS = 1_000;

type EngineState = 'listening' | 'connecting' | 'ready' | 'closed';

/**
 * The tcp backend inside a rank's communication worker: a full mesh of authenticated node:net
 * connections ([Note: tcp mesh]), op headers on every connection ([Note: op header]), ring
 * schedules for bulk data ([Note: ring all-reduce]) and a direct exchange for small all-reduces.
 * Sequencing, header comparison and the broken-group state come from the engine base
 * ([Note: engine base]); every byte goes through the PeerLinks ([Note: peer link]).
 */
export class TcpEngine extends EngineBase<TcpInit> {
  private state: EngineState = 'listening';
  private acceptor: PeerAcceptor | undefined;
  private readonly links: (PeerLink | null)[];
  private readonly scratch = new RingScratch();
  private readonly work = new WorkArrays();
  /** Turns each op into its eager bytes and ring plan or direct exchange. */
  private readonly preparation: OpPreparation;
  private readonly notify: (message: unknown) => void;
  /** libc's socket calls when koffi loads and the links are plain ([Note: native data path]). */
  private readonly native: NativeSockets | undefined;
  private nativeReceive: Uint8Array | undefined;
  private nativeRun: NativeRingRun | undefined;
  private nativeExchange: NativeHeaderExchange | undefined;
  /** OpenBLAS's in-place add for reduce steps, and the path counts ([Note: blas reduce steps]). */
  private readonly nativeReduce: NativeReduce;
  /** Per-phase totals when FSDP_TCP_PROFILE=1 ([Note: native profile]). */
  private readonly profile: NativeProfile | undefined;
  /** A peer was lost: closing the links waits PEER_LOSS_CLOSE_DELAY_MS ([Note: breaking the group]). */
  private peerLossSeen = false;
  /** Whom to blame for a lost connection ([Note: blaming a lost peer]). */
  private readonly blame: LossBlame;
  private lossNoticeSent = false;

  constructor(init: TcpInit, context: EngineContext) {
    super(init);
    this.notify = (message) => context.notify(message);
    this.links = new Array<PeerLink | null>(init.size).fill(null);
    this.preparation = new OpPreparation(init.rank, init.size, this.scratch, this.work, this.links);
    this.native = init.secure ? undefined : loadNativeSockets(init.nativeSockets);
    this.profile = nativeProfile(this.native);
    this.blame = new LossBlame(
      this.links,
      this.native,
      { rank: init.rank, previous: (init.rank - 1 + init.size) % init.size },
      {
        isBroken: () => this.isBroken(),
        decided: (error) => {
          if (error.code !== 'aborted') this.breakForLoss(error);
        },
      },
    );
    const reduce = engineReduce({
      setting: init.blas,
      nativePath: this.native !== undefined,
      koffiPath: init.nativeSockets,
      counts: init.reduceCounts,
    });
    this.nativeReduce = reduce.reduce;
    if (reduce.failure !== undefined) {
      this.notify({ type: 'init-failed', message: reduce.failure });
      return;
    }
    if (init.nativeRequired === true && !init.secure && this.native === undefined) {
      this.notify({
        type: 'init-failed',
        message: `FSDP_TCP_NATIVE=1, but koffi at ${init.nativeSockets} could not load libc's send/recv/poll; unset FSDP_TCP_NATIVE to fall back to node:net.`,
      });
      return;
    }
    void PeerAcceptor.listen(init).then(
      (acceptor) => {
        this.acceptor = acceptor;
        this.notify({ type: 'listening', port: acceptor.port(), localName: acceptor.localName() });
      },
      (error: unknown) =>
        this.notify({ type: 'init-failed', message: `cannot listen on ${init.host}: ${String(error)}` }),
    );
  }

  override control(message: MainToWorkerMessage): void {
    if (message.type !== 'connect') return;
    void this.connect(message.endpoints);
  }

  private async connect(endpoints: string[]): Promise<void> {
    if (this.state !== 'listening') throw new Error(`TcpEngine.connect from state ${this.state}`);
    this.state = 'connecting';
    try {
      const [accepted, connected] = await Promise.all([
        this.acceptor!.all(),
        connectPeers(endpoints, this.init),
      ]);
      for (const [peer, socket] of [...accepted, ...connected]) {
        this.links[peer] = new PeerLink(
          peer,
          socket,
          (link, error) => this.peerLost(link, error),
          this.profile === undefined ? undefined : (bytes) => this.profile!.nodeNetRead(bytes),
        );
      }
      // Every peer is in: stop listening, so nothing else can even attempt the handshake.
      this.acceptor!.close();
      this.state = 'ready';
      this.notify({ type: 'ready' });
    } catch (error) {
      this.notify({ type: 'init-failed', message: error instanceof Error ? error.message : String(error) });
    }
  }

  close(): void {
    if (this.profile !== undefined && this.state !== 'closed')
      process.stderr.write(`${this.profile.report(this.init.rank)}\n`);

    this.state = 'closed';
    for (const link of this.links) link?.close();
    this.acceptor?.close();
  }

  protected override closeTransport(): void {
    if (this.state === 'closed') return;
    // A lost peer: the links close after the delay peerLost scheduled ([Note: breaking the group]).
    if (this.peerLossSeen) return;
    for (const link of this.links) link?.close();
  }

  /** [Note: abort] on tcp: the notice on every connection, then a graceful close once it is sent. */
  protected override sendAbort(message: string): void {
    const frame = encodeAbortFrame(message);
    for (const link of this.links) {
      if (link === null) continue;
      link.write(frame);
      link.flushed().then(
        () => link.end(),
        () => undefined,
      );
    }
  }

  protected override waitingOn(): number | undefined {
    const native = this.nativeExchange?.waitingOn() ?? this.nativeRun?.waitingOn();
    if (native !== undefined) return native;
    const peer = this.links.findIndex((link) => link?.isReading() === true);
    return peer >= 0 ? peer : undefined;
  }

  /**
   * [Note: breaking the group] After a failure every link is closed, so peers blocked on this rank
   * fail at once. When the failure is a lost peer, this rank first tells every other peer which
   * rank it lost (a loss notice), and closing waits a moment: in the full mesh every rank should
   * see the dead peer's connection close itself and blame it rather than this rank
   * ([Note: blaming a lost peer]).
   */
  private peerLost(link: PeerLink, error: CollectiveError): void {
    // A peer that aborted wrote its notice, then closed: the notice may wait unread.
    const notice = abortMessageIn(link.unreadBytes());
    if (notice !== undefined) this.blame.settle(this.peerAborted(link.peer, notice));
    else if (!this.isBroken()) this.blame.report({ link, error });
    this.closeAfterLoss();
  }

  /** Breaks the group for a lost peer, and tells every other peer which one, once. */
  private breakForLoss(error: CollectiveError): void {
    this.markBroken(error);
    this.sendLossNotice(error, 'lost');
  }

  /**
   * [Note: timing out tells the others] An op that times out waiting for a peer breaks the group,
   * and this rank's connections close, while the other ranks may still wait for the same peer: a
   * third rank whose own timer has not fired yet would see this rank's connection end and blame
   * this rank ('peer-lost'), though the stalled rank is the one it waits for too (measured: W=3,
   * rank 1 stalled, rank 2 named rank 0 once in a loaded full-suite run). So before closing, a
   * rank that timed out waiting for a named peer writes a loss notice with the reason 'timeout'
   * on every other connection, and closes after the same delay as for a lost peer (so the notice
   * is sent, not dropped from a congested socket); a rank that reads it fails with 'timeout'
   * naming the stalled rank ([Note: blaming a lost peer], rule 1).
   */
  protected override breakGroup(error: CollectiveError): void {
    if (error.code === 'timeout' && error.peer !== undefined && !this.isBroken()) {
      this.sendLossNotice(error, 'timeout');
      this.closeAfterLoss();
    }
    super.breakGroup(error);
  }

  /** Tells every peer but the blamed one which rank this rank gave up on, and why; once. */
  private sendLossNotice(error: CollectiveError, reason: LossReason): void {
    if (this.lossNoticeSent || error.peer === undefined) return;
    this.lossNoticeSent = true;
    const frame = encodeLossNotice({ lost: error.peer, message: error.message, reason });
    for (const link of this.links) if (link !== null && link.peer !== error.peer) link.write(frame);
  }

  private closeAfterLoss(): void {
    if (this.peerLossSeen) return;
    this.peerLossSeen = true;
    setTimeout(() => {
      if (this.state === 'closed') return;
      for (const link of this.links) link?.close();
    }, PEER_LOSS_CLOSE_DELAY_MS).unref();
  }

  /**
   * [Note: eager first segment]
   * A collective's header and the bytes its schedule sends before anything arrives (a ring's
   * initial range to the next rank, a direct all-reduce's payload to every peer) go out together;
   * the header announces how many such eager bytes follow it on that connection. Then the rank
   * reads every peer's header and compares: on a match the schedule continues (its first read
   * finds the peer's eager bytes already queued); on a difference every rank fails with
   * 'mismatch' (each compares with all its peers) after skipping the eager bytes each peer
   * announced, so the streams stay aligned and the group usable. This saves, on every op, the
   * round trip a header exchange cost before any payload moved. The price: a mismatched op may
   * leave the caller's buffers partly written (rounded, or its own block copied in), as a failed
   * op's buffers may be anyway.
   */
  protected override async execute(op: OpMessage, seq: number): Promise<void> {
    try {
      await this.executeProfiled(op, seq);
    } catch (error) {
      // A lost connection failed the op while its blame is being decided: fail with the verdict.
      const verdict = this.blame.deciding;
      if (verdict !== undefined) throw await verdict;
      throw error;
    }
  }

  private async executeProfiled(op: OpMessage, seq: number): Promise<void> {
    if (this.profile === undefined || op.kind === 'barrier') return this.executeOp(op, seq);
    const started = this.profile.mark();
    this.profile.opStarted();
    try {
      await this.executeOp(op, seq);
    } finally {
      this.profile.opEnded();
      this.profile.add('op', started);
    }
  }

  private async executeOp(op: OpMessage, seq: number): Promise<void> {
    const header = this.header(op, seq);
    if (op.kind === 'send') return this.send(op, header);
    if (op.kind === 'recv') return this.recv(op, header);
    const { rank, size } = this.init;
    const previous = this.links[(rank - 1 + size) % size] ?? null;
    const next = this.links[(rank + 1) % size] ?? null;
    // bfloat16 staging for outgoing bytes: at most max(2, size) x count elements per op.
    const bfloat16Wire = op.wireDtype === 'bfloat16' || op.dtype === 'bfloat16';
    this.scratch.resetStaging(bfloat16Wire ? op.count * Math.max(2, size) : 0);
    const prepared = this.preparation.prepare(op);
    // A barrier stays on node:net: a header-only exchange measured no cheaper through libc
    // ([Note: native header exchange]).
    if (prepared.ring !== undefined && this.nativeUsable())
      return this.executeNative(op, header, prepared.ring, prepared.eager.toNext, previous!, next!);
    const late = await this.exchangeHeaders(op, header, prepared.eager, next, MAX_EAGER_BYTES);
    for (const [link, bytes] of late) link.write(bytes);
    await prepared.rest(previous, next);
  }

  /** Whether this op can run on the native data path: koffi loaded and every link is a plain socket. */
  private nativeUsable(): boolean {
    if (this.native === undefined || this.init.size < 2) return false;
    return this.links.every((link, peer) => peer === this.init.rank || link?.fd() !== undefined);
  }

  /**
   * A ring op on the native data path: headers and eager bytes through libc ([Note: native
   * header exchange]), then the ring plan's bytes ([Note: native data path]). Every link's
   * node:net reading is held for the whole op ([Note: held reading]).
   */
  private async executeNative(
    op: OpMessage,
    header: OpHeader,
    ring: { plan: RingPlan; after?: () => void },
    eager: Uint8Array | null,
    previous: PeerLink,
    next: PeerLink,
  ): Promise<void> {
    const { links, profile } = this;
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
      const exchange = new NativeHeaderExchange(links, next, this.native!, frames, this.init.abort, profile);
      this.nativeExchange = exchange;
      try {
        await driveNativeRun(exchange, links, () => this.isBroken() || this.state === 'closed', profile);
      } finally {
        this.nativeExchange = undefined;
      }
      if (exchange.notice !== undefined) {
        for (const link of links) link?.releaseReading();
        // Throws the notice's error (an abort, or a peer's loss).
        await this.readFrame(exchange.notice);
      }
      const received = exchange
        .headers()
        .map((bytes, peer) =>
          bytes === null ? null : { header: decodeHeader(bytes, peer), eagerBytes: eagerBytesIn(bytes) },
        );
      const headers = received.map((frame) => frame?.header ?? null);
      const mismatched = headers.some((theirs) => theirs !== null && !sameOp(header, theirs));
      countNativeHeaders(this.init.headerCounts, mismatched);
      if (exchangeStart !== undefined) profile!.add('header exchange', exchangeStart);
      if (mismatched) {
        const mismatchStart = profile?.mark();
        // Every byte a header announced must arrive, and every announced byte is skipped.
        this.writeUnsent(exchange);
        for (const link of links) link?.releaseReading();
        await Promise.all(
          received.map((frame, peer) =>
            frame === null || frame.eagerBytes === 0
              ? undefined
              : this.links[peer]!.read(frame.eagerBytes, () => undefined),
          ),
        );
        if (mismatchStart !== undefined) profile!.add('mismatch (node:net)', mismatchStart);
        this.checkHeaders(op, header, headers);
      }
      const late = exchange.takeUnsent(next);
      if (eager !== null && announced < eager.length) late.push(eager.subarray(announced));
      await this.runNative(ring.plan, previous, next, late);
    } finally {
      for (const link of links) link?.releaseReading();
    }
    ring.after?.();
  }

  /** What a header exchange did not hand to the kernel, through node:net (after the kernel's bytes). */
  private writeUnsent(exchange: NativeHeaderExchange): void {
    for (const link of this.links)
      if (link !== null) for (const bytes of exchange.takeUnsent(link)) link.write(bytes);
  }

  /** A ring plan's bytes through libc ([Note: native data path]); `late` goes out first. */
  private async runNative(
    plan: RingPlan,
    previous: PeerLink,
    next: PeerLink | null,
    late: Uint8Array[],
  ): Promise<void> {
    this.nativeReceive ??= new Uint8Array(1 << 20);
    const run = new NativeRingRun(
      plan,
      previous,
      next,
      this.links,
      this.native!,
      this.scratch,
      this.nativeReceive,
      this.init.abort,
      this.profile,
      this.nativeReduce,
    );
    for (const bytes of late) run.queueSend(bytes);
    this.nativeRun = run;
    try {
      await driveNativeRun(run, this.links, () => this.isBroken() || this.state === 'closed', this.profile);
    } finally {
      this.nativeRun = undefined;
    }
  }

  /**
   * Writes this op's header and eager bytes to every peer, reads theirs and compares (see
   * [Note: eager first segment]). Eager bytes too many to announce wait for the check: they are
   * returned, for the caller to send once it passed.
   */
  private async exchangeHeaders(
    op: OpMessage,
    header: OpHeader,
    eager: PreparedOp['eager'],
    next: PeerLink | null,
    eagerLimit: number,
  ): Promise<[PeerLink, Uint8Array][]> {
    const late: [PeerLink, Uint8Array][] = [];
    for (const link of this.links) {
      if (link === null) continue;
      const bytes = eager.toAll ?? (link === next ? eager.toNext : null);
      const announced = Math.min(bytes?.length ?? 0, eagerLimit);
      link.write(encodeHeader(header, announced));
      if (bytes === null) continue;
      link.write(bytes.subarray(0, announced));
      if (announced < bytes.length) late.push([link, bytes.subarray(announced)]);
    }
    const received = await Promise.all(
      this.links.map((link) => (link === null ? Promise.resolve(null) : this.readFrame(link))),
    );
    const headers = received.map((frame) => frame?.header ?? null);
    if (headers.some((theirs) => theirs !== null && !sameOp(header, theirs))) {
      // Skip what each peer sent ahead of its check, so the streams stay aligned.
      await Promise.all(
        received.map((frame, peer) =>
          frame === null || frame.eagerBytes === 0
            ? undefined
            : this.links[peer]!.read(frame.eagerBytes, () => undefined),
        ),
      );
    }
    this.checkHeaders(op, header, headers);
    return late;
  }

  private async readHeader(link: PeerLink): Promise<OpHeader> {
    return (await this.readFrame(link)).header;
  }

  /** A peer's header frame (its header and the eager bytes it announces). */
  private async readFrame(link: PeerLink): Promise<{ header: OpHeader; eagerBytes: number }> {
    const bytes = await this.readBytes(link, HEADER_BYTES);
    const abortLength = abortMessageLength(bytes);
    if (abortLength !== undefined) {
      const message = await this.readBytes(link, abortLength);
      throw this.peerAborted(link.peer, message.toString('utf8'));
    }
    // A peer lost another rank and says so before it closes ([Note: blaming a lost peer]).
    const loss = lossNoticeHeader(bytes);
    if (loss !== undefined) {
      const message = await this.readBytes(link, loss.length + HEADER_BYTES);
      const error = noticeError(link.peer, {
        lost: loss.lost,
        message: message.toString('utf8', 0, loss.length),
        reason: loss.reason,
      });
      this.blame.settle(error);
      this.closeAfterLoss();
      throw error;
    }
    return { header: decodeHeader(bytes, link.peer), eagerBytes: eagerBytesIn(bytes) };
  }

  private async readBytes(link: PeerLink, length: number): Promise<Buffer> {
    const bytes = Buffer.alloc(length);
    let filled = 0;
    await link.read(length, (chunk) => {
      bytes.set(chunk, filled);
      filled += chunk.length;
    });
    return bytes;
  }

  private async send(op: OpMessage, header: OpHeader): Promise<void> {
    const link = this.links[op.peer]!;
    link.write(encodeHeader(header));
    const input = op.input!;
    link.write(new Uint8Array(input.buffer, input.byteOffset, input.byteLength));
    await link.flushed();
  }

  private async recv(op: OpMessage, header: OpHeader): Promise<void> {
    const link = this.links[op.peer]!;
    const theirs = await this.readHeader(link);
    const expected = expectedSendHeader(header, this.init.rank);
    if (!sameOp(expected, theirs)) {
      // The sender's payload is already on its way; the stream can no longer be trusted.
      throw new CollectiveError(this.mismatch(op, expected, theirs, op.peer).message, {
        code: 'malformed-frame',
        op: op.kind,
        rank: this.init.rank,
        peer: op.peer,
      });
    }
    const output = op.output!;
    const bytes = new Uint8Array(output.buffer, output.byteOffset, output.byteLength);
    let filled = 0;
    await link.read(bytes.length, (chunk) => {
      bytes.set(chunk, filled);
      filled += chunk.length;
    });
  }
}

/** The tcp backend's engine module entry (see engine.ts). */
export function createEngine(init: EngineInit, context: EngineContext): TcpEngine {
  return new TcpEngine(init as TcpInit, context);
}
