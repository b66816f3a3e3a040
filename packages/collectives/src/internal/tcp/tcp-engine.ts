import { CollectiveError } from '../../errors.js';
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
import type { MainToWorkerMessage, OpMessage } from '../op-message.js';
import {
  encodeAbortFrame,
  encodeFailureNotice,
  encodeGoodbye,
  MAX_EAGER_BYTES,
  noticeMessageIn,
} from './frame-header.js';
import { engineReduce } from './native-blas.js';
import { NativeOpPath } from './native-op.js';
import { enlargeLocalSendBuffers, loadNativeSockets, type NativeSockets } from './native-sockets.js';
import { NodeNetFrames } from './node-net-frames.js';
import { OpPreparation, WorkArrays } from './op-preparation.js';
import { PeerLink } from './peer-link.js';
import { RingScratch } from './ring.js';
import type { TcpInit } from './tcp-backend.js';
import { connectPeers, PeerAcceptor } from './tcp-connections.js';
import { LossBlame, TcpFailure } from './tcp-failure.js';

type EngineState = 'listening' | 'connecting' | 'ready' | 'closed';

/**
 * The tcp backend inside a rank's communication worker: a full mesh ([Note: tcp mesh]), op
 * headers ([Note: op header]), ring schedules ([Note: ring all-reduce]) and a direct exchange for
 * small all-reduces, over PeerLinks (NodeNetFrames, or libc through NativeOpPath: [Note: native
 * data path]); failures' effect on the links belongs to TcpFailure ([Note: tcp failure state]).
 */
export class TcpEngine extends EngineBase<TcpInit> {
  private state: EngineState = 'listening';
  /** Broken by a departed peer ([Note: clean departure]): links stay open, goodbye still said. */
  private brokenByDeparture = false;
  private acceptor: PeerAcceptor | undefined;
  private readonly links: (PeerLink | null)[];
  private readonly scratch = new RingScratch();
  private readonly work = new WorkArrays();
  private readonly preparation: OpPreparation;
  private readonly notify: (message: unknown) => void;
  private readonly frames: NodeNetFrames;
  /** When koffi loads and the links are plain ([Note: native data path]). */
  private readonly native: NativeOpPath | undefined;
  private readonly sockets: NativeSockets | undefined;
  private readonly failure: TcpFailure;
  private readonly blame: LossBlame;

  constructor(init: TcpInit, context: EngineContext) {
    super(init);
    this.notify = (message) => context.notify(message);
    this.links = new Array<PeerLink | null>(init.size).fill(null);
    this.preparation = new OpPreparation(init.rank, init.size, this.scratch, this.work, this.links);
    this.failure = new TcpFailure(this.links);
    this.frames = new NodeNetFrames(this.links, {
      aborted: (peer, message) => this.peerAborted(peer, message),
      lossNoticed: (notified) => {
        const error = this.blame.corroborate(notified);
        this.blame.settle(error);
        this.failure.lossSeen();
        return error;
      },
    });
    const sockets = init.secure ? undefined : loadNativeSockets(init.nativeSockets);
    this.sockets = sockets;
    this.blame = new LossBlame(
      this.links,
      sockets,
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
      nativePath: sockets !== undefined,
      koffiPath: init.nativeSockets,
      counts: init.counters,
    });
    this.native =
      sockets === undefined
        ? undefined
        : new NativeOpPath({
            rank: init.rank,
            size: init.size,
            links: this.links,
            sockets,
            scratch: this.scratch,
            abort: init.abort,
            reduce: reduce.reduce,
            counters: init.counters,
            frames: this.frames,
            stopped: () => this.isBroken() || this.state === 'closed',
            checkHeaders: (op, mine, headers) => this.checkHeaders(op, mine, headers),
          });
    if (reduce.failure !== undefined) {
      this.notify({ type: 'init-failed', message: reduce.failure });
      return;
    }
    if (init.nativeRequired === true && !init.secure && sockets === undefined) {
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
        this.links[peer] = new PeerLink(peer, socket, (link, error) => this.peerLost(link, error));
      }
      if (this.sockets !== undefined)
        enlargeLocalSendBuffers(this.links, this.sockets, this.init.sendBufferBytes ?? 0, this.init.counters);
      // Nothing else may even attempt the handshake.
      this.acceptor!.close();
      this.state = 'ready';
      this.notify({ type: 'ready' });
    } catch (error) {
      this.notify({ type: 'init-failed', message: error instanceof Error ? error.message : String(error) });
    }
  }

  /**
   * [Note: clean departure] The process ends normally and nothing is queued: a goodbye on every
   * open connection, in the kernel, then the end of each stream (FIN), so a peer still finishing
   * this rank's last op reads all of it and takes the end for a departure, not a loss.
   */
  async depart(): Promise<void> {
    if (this.state !== 'ready' || (this.isBroken() && !this.brokenByDeparture)) return;
    const goodbye = encodeGoodbye({ collectives: this.collectivesRun() });
    const open = this.links.filter(
      (link): link is PeerLink =>
        link !== null && link.failed() === undefined && link.departed() === undefined,
    );
    for (const link of open) link.write(goodbye);
    await Promise.all(open.map((link) => link.flushed().catch(() => undefined)));
    for (const link of open) link.end();
  }

  async close(): Promise<void> {
    this.state = 'closed';
    const delayMs = this.failure.remainingDelayMs();
    if (delayMs > 0) {
      // [Note: closing after a notice]
      for (const link of this.links) link?.end();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise((resolve) => (timer = setTimeout(resolve, delayMs))),
        Promise.all(this.links.map((link) => link?.settled())),
      ]);
      clearTimeout(timer);
    }
    this.failure.engineClosed();
    for (const link of this.links) link?.close();
    this.acceptor?.close();
  }

  protected override closeTransport(): void {
    if (this.state === 'closed') return;
    // After a lost peer or a timeout the links close after a delay ([Note: breaking the group]).
    this.failure.closeNow();
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

  /** [Note: failure agreement] on tcp: one frame read from each peer, judged as it comes. */
  protected override collectNotices(
    notice: FailureNotice,
    _op: OpMessage,
    judge: (peer: number, reply: NoticeReply) => string | undefined,
  ): Promise<string | undefined> {
    const frame = encodeFailureNotice(notice);
    const links = this.links.filter((link): link is PeerLink => link !== null);
    for (const link of links) link.write(frame);
    return new Promise((resolve, reject) => {
      let waiting = links.length;
      if (waiting === 0) resolve(undefined);
      for (const link of links) {
        this.frames.readFrameOrNotice(link).then((read) => {
          const reply: NoticeReply =
            'notice' in read ? { type: 'notice', notice: read.notice } : { type: 'op', header: read.header };
          const why = judge(link.peer, reply);
          if (why !== undefined) resolve(why);
          else if (--waiting === 0) resolve(undefined);
        }, reject);
      }
    });
  }

  protected override waitingOn(): number | undefined {
    const native = this.native?.waitingOn();
    if (native !== undefined) return native;
    const peer = this.links.findIndex((link) => link?.isReading() === true);
    return peer >= 0 ? peer : undefined;
  }

  private peerLost(link: PeerLink, error: CollectiveError): void {
    // An aborting or disagreeing peer wrote its notice before closing: it may wait unread.
    const notice = noticeMessageIn(link.unreadBytes(), link.peer);
    if (notice !== undefined) this.blame.settle(this.peerAborted(link.peer, notice));
    else if (!this.isBroken()) this.blame.report({ link, error });
    this.failure.lossSeen();
  }

  private breakForLoss(error: CollectiveError): void {
    this.markBroken(error);
    this.failure.lost(error);
  }

  protected override breakGroup(error: CollectiveError): void {
    // [Note: clean departure] An op needed a departed peer: nothing sent is in doubt, so the
    // links stay open for peers still finishing earlier ops.
    const departed = error.peer === undefined ? undefined : this.links[error.peer]?.departed();
    if (departed !== undefined && !this.isBroken()) {
      this.brokenByDeparture = true;
      this.markBroken(error);
      return;
    }
    if (error.code === 'timeout' && error.peer !== undefined && !this.isBroken())
      this.failure.timedOut(error);
    super.breakGroup(error);
  }

  /** Fails with the blame's verdict when a lost connection failed the op. */
  protected override async execute(op: OpMessage, seq: number): Promise<void> {
    try {
      await this.executeOp(op, seq);
      // [Note: clean departure] Every byte the op owes is in the kernel before its Work completes.
      for (const link of this.links) if (link?.hasPendingWrites() === true) await link.flushed();
    } catch (error) {
      const verdict = this.blame.deciding;
      if (verdict !== undefined) throw await verdict;
      throw error;
    } finally {
      // Also after a failed op: a mismatch leaves the group usable ([Note: work arrays dropped when idle]).
      this.work.releaseLargeWhenIdle();
    }
  }

  private async executeOp(op: OpMessage, seq: number): Promise<void> {
    const header = this.header(op, seq);
    if (op.kind === 'send') return this.send(op, header);
    if (op.kind === 'recv') return this.recv(op, header);
    const { rank, size } = this.init;
    const previous = this.links[(rank - 1 + size) % size] ?? null;
    const next = this.links[(rank + 1) % size] ?? null;
    // Outgoing bfloat16: at most max(2, size) x count elements per op.
    const bfloat16Wire = op.wireDtype === 'bfloat16' || op.dtype === 'bfloat16';
    this.scratch.resetStaging(bfloat16Wire ? op.count * Math.max(2, size) : 0);
    const prepared = this.preparation.prepare(op);
    // Barriers stay on node:net ([Note: native header exchange]).
    if (prepared.ring !== undefined && this.native?.usable() === true)
      return this.native.execute(op, header, prepared.ring, prepared.eager.toNext, previous!, next!);
    // Eager bytes too many to announce wait for the header check ([Note: eager first segment]).
    const { headers, late } = await this.frames.exchange(header, prepared.eager, next, MAX_EAGER_BYTES);
    this.checkHeaders(op, header, headers);
    for (const [link, bytes] of late) link.write(bytes);
    await prepared.rest(previous, next);
  }

  private async send(op: OpMessage, header: OpHeader): Promise<void> {
    await this.frames.send(this.links[op.peer]!, header, op.input!);
  }

  private async recv(op: OpMessage, header: OpHeader): Promise<void> {
    const link = this.links[op.peer]!;
    const theirs = (await this.frames.readFrame(link)).header;
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
    await this.frames.receive(link, op.output!);
  }
}

export function createEngine(init: EngineInit, context: EngineContext): TcpEngine {
  return new TcpEngine(init as TcpInit, context);
}
