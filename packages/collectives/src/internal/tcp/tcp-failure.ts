import { CollectiveError } from '../../errors.js';
import { encodeLossNotice, type LossNotice, type LossReason, lossNoticeIn } from './frame-header.js';
import { type NativeSockets, POLLERR, POLLHUP, POLLRDHUP, PollSet } from './native-sockets.js';
import type { PeerLink } from './peer-link.js';

/** See [Note: breaking the group]. */
const PEER_LOSS_CLOSE_DELAY_MS = 1_000;

/**
 * What happens to the links once the group fails: 'open' (nothing closed them yet),
 * 'closing-after-delay' (a loss or a timeout was seen: they close PEER_LOSS_CLOSE_DELAY_MS later),
 * 'closed' (closed, by the delay, at once, or by the engine's own close).
 */
type LinksState = 'open' | 'closing-after-delay' | 'closed';

/**
 * [Note: breaking the group] After a failure every link is closed, so peers blocked on this rank
 * fail at once. When the failure is a lost peer, this rank first tells every other peer which
 * rank it lost (a loss notice), and closing waits a moment: in the full mesh every rank should
 * see the dead peer's connection close itself and blame it rather than this rank
 * ([Note: blaming a lost peer]).
 *
 * [Note: timing out tells the others] An op that times out waiting for a peer breaks the group,
 * and this rank's connections close, while the other ranks may still wait for the same peer: a
 * third rank whose own timer has not fired yet would see this rank's connection end and blame
 * this rank ('peer-lost'), though the stalled rank is the one it waits for too (measured: W=3,
 * rank 1 stalled, rank 2 named rank 0 once in a loaded full-suite run). So before closing, a
 * rank that timed out waiting for a named peer writes a loss notice with the reason 'timeout'
 * on every other connection, and closes after the same delay as for a lost peer (so the notice
 * is sent, not dropped from a congested socket); a rank that reads it fails with 'timeout'
 * naming the stalled rank ([Note: blaming a lost peer], rule 1).
 *
 * [Note: tcp failure state] TcpFailure is the one owner of these two facts, and the engine only
 * calls its transitions:
 * - the links: 'open' -> 'closing-after-delay' (`lossSeen`, `timedOut`) -> 'closed' (the delay
 *   ran out), or 'open' -> 'closed' at once (`closeNow`: any other failure), or any state ->
 *   'closed' (`engineClosed`). Once the links leave 'open' nothing reopens them or schedules a
 *   second close; while 'closing-after-delay', `closeNow` leaves them open for the notice to go.
 * - the loss notice: sent at most once per engine (`lost` with the reason 'lost', `timedOut`
 *   with 'timeout'), only for an error that names a peer, and never to that peer. It is
 *   independent of the links' state: a blame decided after the delayed close was scheduled
 *   still sends it (the links are still open then).
 */
export class TcpFailure {
  #links: LinksState = 'open';
  /** The reason the loss notice went out with; undefined while none was sent. */
  #noticeReason: LossReason | undefined;

  constructor(private readonly links: readonly (PeerLink | null)[]) {}

  /** The blame for a lost connection was decided ([Note: blaming a lost peer]): tell the others. */
  lost(error: CollectiveError): void {
    this.#sendNotice(error, 'lost');
  }

  /**
   * An op timed out waiting for a named peer before the group broke another way ([Note: timing
   * out tells the others]): tell the others, then close after the delay.
   */
  timedOut(error: CollectiveError): void {
    this.#sendNotice(error, 'timeout');
    this.lossSeen();
  }

  /** A peer's connection ended, or a peer's loss notice arrived: the links close after the delay. */
  lossSeen(): void {
    if (this.#links !== 'open') return;
    this.#links = 'closing-after-delay';
    setTimeout(() => {
      if (this.#links !== 'closing-after-delay') return;
      this.#close();
    }, PEER_LOSS_CLOSE_DELAY_MS).unref();
  }

  /** The group broke for any other reason: close the links now, unless a delayed close is due. */
  closeNow(): void {
    if (this.#links === 'closing-after-delay') return;
    this.#close();
  }

  /** The engine closed its links itself: a delayed close has nothing left to do. */
  engineClosed(): void {
    this.#links = 'closed';
  }

  #close(): void {
    this.#links = 'closed';
    for (const link of this.links) link?.close();
  }

  /** Tells every peer but the blamed one which rank this rank gave up on, and why; once. */
  #sendNotice(error: CollectiveError, reason: LossReason): void {
    if (this.#noticeReason !== undefined || error.peer === undefined) return;
    this.#noticeReason = reason;
    const frame = encodeLossNotice({ lost: error.peer, message: error.message, reason });
    for (const link of this.links) if (link !== null && link.peer !== error.peer) link.write(frame);
  }
}

/** How long a loss seen only on the connection this rank receives from waits for more evidence. */
const LOSS_SETTLE_MS = 250;
const LOSS_SETTLE_POLL_MS = 5;

/** What the engine does with the blame. */
export interface LossBlameHooks {
  /** Whether the group already broke (another way, or an earlier verdict). */
  isBroken(): boolean;
  /** The verdict is in: break the group for it. */
  decided(error: CollectiveError): void;
}

/**
 * The one owner of deciding whom a tcp engine blames for a lost connection ([Note: blaming a
 * lost peer] in tcp-failure.ts). States: idle (nothing reported), deciding (the only
 * evidence is the connection this rank receives from ending without a notice: it looks again
 * every LOSS_SETTLE_POLL_MS for LOSS_SETTLE_MS, and a failing op waits on `deciding`), decided
 * (the engine's `decided` hook ran; a waiting op fails with the verdict).
 */
export class LossBlame {
  readonly #reported: ReportedLoss[] = [];
  #pending:
    | { verdict: Promise<CollectiveError>; settle: (error: CollectiveError) => void; deadline: number }
    | undefined;

  constructor(
    private readonly links: readonly (PeerLink | null)[],
    private readonly sockets: NativeSockets | undefined,
    private readonly context: { rank: number; previous: number },
    private readonly hooks: LossBlameHooks,
  ) {}

  /** A connection's end was reported (node:net's close or error, or the native path's). */
  report(loss: ReportedLoss): void {
    this.#reported.push(loss);
    this.#decide();
  }

  /** A verdict found elsewhere (an abort notice, a loss notice where a header was expected). */
  settle(error: CollectiveError): void {
    this.hooks.decided(error);
    this.#pending?.settle(error);
    this.#pending = undefined;
  }

  /** The verdict a failing op waits for while the blame is being decided, else undefined. */
  get deciding(): Promise<CollectiveError> | undefined {
    return this.#pending?.verdict;
  }

  #decide(): void {
    if (this.#reported.length === 0) return;
    if (this.hooks.isBroken()) {
      // Broken some other way meanwhile: the running op already failed with that cause.
      this.#pending?.settle(this.#reported[0]!.error);
      this.#pending = undefined;
      return;
    }
    const verdict = attributeLoss(this.#reported, this.links, this.sockets, this.context);
    if (verdict.settled) {
      this.settle(verdict.error);
      return;
    }
    if (this.#pending === undefined) {
      let settle: (error: CollectiveError) => void = () => undefined;
      const promise = new Promise<CollectiveError>((resolve) => {
        settle = resolve;
      });
      this.#pending = { verdict: promise, settle, deadline: performance.now() + LOSS_SETTLE_MS };
    }
    if (performance.now() >= this.#pending.deadline) this.settle(verdict.error);
    else setTimeout(() => this.#decide(), LOSS_SETTLE_POLL_MS).unref();
  }
}

/** Most bytes read from one closed connection while looking for a loss notice at its end. */
const MAX_DRAIN_BYTES = 64 << 20;

/** A connection whose end this rank's PeerLink reported, with its error. */
export interface ReportedLoss {
  link: PeerLink;
  error: CollectiveError;
}

/** A connection found ended when a loss was first seen. */
interface EndedLink {
  link: PeerLink;
  /** A reset or error (POLLERR/POLLHUP) rather than an orderly end of stream. */
  reset: boolean;
  /** The loss notice its peer wrote before closing, if it did. */
  notice: LossNotice | undefined;
}

/**
 * [Note: blaming a lost peer]
 * When one rank dies, every survivor fails its op naming that rank, whatever the interleaving.
 * The hard part: a survivor that saw the loss fails, and then closes its connections (at once when
 * its program destroys the group or exits, as a training script does on an error), so a third
 * rank can find two connections ended, the dead rank's and the survivor's, and nothing in a FIN or
 * a reset tells which came first. Measured (3 ranks, 64 MiB all-reduce, rank 1 killed, two `yes`
 * loads, load 5-11): rank 0 blamed rank 2 in 6 of 44 runs, each time because rank 0
 * (descheduled, or reading only the connection it receives from) found both ended at once, and
 * `lost` in native-ring.ts preferred the connection it receives from; with notices and rules 1-2
 * below, 3 of 54 runs still blamed rank 2,
 * whose end rank 0 saw 11 ms before the dead rank's own. And while an op waits for headers,
 * node:net does not report the end of a connection whose reading is held ([Note: held
 * reading]): only the survivor's close, later, is seen.
 * So a survivor says why it closes: the first time a rank loses a peer, before anything of its
 * own closes, it writes a loss notice (the lost rank and its own words; see frame-header.ts) on
 * every other connection. A dead rank writes nothing. When a rank sees a connection end
 * (node:net's close or error, or the native path's `lost`), `attributeLoss` looks at every
 * connection: those the native poll finds ended too (held ones included), their unread bytes
 * read to the end of the stream, and what the open ones hold. Then:
 * 1. a notice (at the start or at the end of what a connection left unread) names the rank to
 *    blame: the survivor who wrote it saw the loss first-hand;
 * 2. otherwise an ended connection other than the one this rank receives from in the ring, a
 *    reset first: a survivor's notice cannot be missed there (it sends that way at most headers,
 *    so its notice is not stuck behind bulk bytes, and comes before its end);
 * 3. otherwise the connection this rank receives from ended without a notice. A survivor's notice
 *    may be stuck behind the bulk bytes there, or already taken as payload, so this is not
 *    decided at once: LossBlame (tcp-failure.ts) looks again every few ms for LOSS_SETTLE_MS
 *    (250 ms), and the failing op waits for the verdict. The dead rank's other connections do end (measured: a
 *    killed rank's connections were seen to end up to 11 ms apart at load 6-8, and ~30 ms after
 *    the kill), or another survivor's notice arrives; if neither comes, that rank is blamed.
 * A notice found where a header is expected fails the op the same way. Without the native path
 * (TLS, or FSDP_TCP_NATIVE=0) nothing is held, the ends are the ones node:net reports, in the
 * order they happen, and the same rules apply to them.
 */
export function attributeLoss(
  reported: readonly ReportedLoss[],
  links: readonly (PeerLink | null)[],
  sockets: NativeSockets | undefined,
  context: { rank: number; previous: number },
): { error: CollectiveError; settled: boolean } {
  const first = reported[0]!;
  const ended: EndedLink[] = [
    ...reported.map(({ link }) => ({ link, reset: false, notice: lossNoticeIn(link.unreadBytes()) })),
    ...(sockets === undefined ? [] : endedNatively(links, reported, sockets)),
  ];
  const gone = new Set(ended.map(({ link }) => link));
  // A survivor's notice may also wait on a connection that is still open.
  const open = links.filter(
    (link): link is PeerLink => link !== null && !gone.has(link) && link.departed() === undefined,
  );
  const told = [...ended, ...open.map((link) => ({ link, notice: lossNoticeIn(link.unreadBytes()) }))].find(
    (candidate) => candidate.notice !== undefined && candidate.notice.lost !== context.rank,
  );
  if (told !== undefined)
    return { error: noticeError(told.link.peer, told.notice!, first.error), settled: true };
  const order = (candidate: EndedLink) =>
    (candidate.link.peer === context.previous ? 2 : 0) + (candidate.reset ? 0 : 1);
  const blamed = ended.reduce((best, candidate) => (order(candidate) < order(best) ? candidate : best));
  const settled = blamed.link.peer !== context.previous || open.length === 0;
  const report = reported.find(({ link }) => link === blamed.link);
  if (report !== undefined) return { error: report.error, settled };
  const error = new CollectiveError(`rank ${blamed.link.peer} closed the connection`, {
    code: 'peer-lost',
    peer: blamed.link.peer,
    cause: first.error,
  });
  return { error, settled };
}

/**
 * The error a loss notice from `from` stands for: the rank it names was lost ('peer-lost'), or
 * `from` timed out waiting for it ('timeout', [Note: timing out tells the others]).
 */
export function noticeError(from: number, notice: LossNotice, cause?: unknown): CollectiveError {
  if (notice.reason === 'timeout')
    return new CollectiveError(
      `rank ${from} timed out waiting for rank ${notice.lost} (${notice.message}) and closed its connections`,
      {
        code: 'timeout',
        peer: notice.lost,
        cause,
        fix: `check whether rank ${notice.lost} died, stalled or issued a different sequence of ops; raise timeoutMs if it is just slow.`,
      },
    );
  return new CollectiveError(
    `rank ${notice.lost} was lost: rank ${from} saw it first (${notice.message}) and closed its connections`,
    { code: 'peer-lost', peer: notice.lost, cause },
  );
}

/**
 * The other connections whose peer has ended them (poll(2) with POLLRDHUP), with what they left
 * unread moved into the link's queue, so a notice at its end can be read.
 */
function endedNatively(
  links: readonly (PeerLink | null)[],
  reported: readonly ReportedLoss[],
  sockets: NativeSockets,
): EndedLink[] {
  const polled: PeerLink[] = [];
  const polls = new PollSet(links.length);
  for (const link of links) {
    const fd = link === null || reported.some((loss) => loss.link === link) ? undefined : link.fd();
    if (fd === undefined) continue;
    polls.set(polled.length, fd, POLLRDHUP);
    polled.push(link!);
  }
  if (polled.length === 0 || sockets.poll(polls.buffer, polled.length, 0) <= 0) return [];
  const ended: EndedLink[] = [];
  polled.forEach((link, index) => {
    const revents = polls.revents(index);
    if ((revents & (POLLERR | POLLHUP | POLLRDHUP)) === 0) return;
    drainInto(link, polls.fd(index), sockets);
    // A peer that said goodbye left normally ([Note: clean departure]): not a loss.
    if (link.departedNatively()) return;
    ended.push({
      link,
      reset: (revents & (POLLERR | POLLHUP)) !== 0,
      notice: lossNoticeIn(link.unreadBytes()),
    });
  });
  return ended;
}

/** Reads what an ended connection still holds into its link's queue, after what node:net read. */
export function drainInto(link: PeerLink, fd: number, sockets: NativeSockets): void {
  const unread: Uint8Array[] = [];
  const buffer = new Uint8Array(256 * 1024);
  for (let total = 0; total < MAX_DRAIN_BYTES; ) {
    const received = sockets.recv(fd, buffer, buffer.length);
    if (received <= 0) break;
    unread.push(buffer.slice(0, received));
    total += received;
  }
  link.appendUnread(unread);
}
