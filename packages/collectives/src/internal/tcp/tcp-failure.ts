import { CollectiveError } from '../../errors.js';
import { encodeLossNotice, type LossNotice, type LossReason, lossNoticeIn } from './frame-header.js';
import { type NativeSockets, POLLERR, POLLHUP, POLLRDHUP, PollSet } from './native-sockets.js';
import type { PeerLink } from './peer-link.js';

const PEER_LOSS_CLOSE_DELAY_MS = 1_000;

type LinksState = 'open' | 'closing-after-delay' | 'closed';

/**
 * [Note: breaking the group] After a failure every link closes, so peers blocked on this rank
 * fail at once. For a lost peer this rank first writes a loss notice (the rank it lost) to every
 * other peer and closes after a delay, so every rank blames the dead peer, not this one
 * ([Note: blaming a lost peer]).
 *
 * [Note: timing out tells the others] A rank that timed out waiting for a named peer writes a
 * loss notice with the reason 'timeout' to every other peer and closes after the same delay: a
 * rank whose own timer has not fired then fails with 'timeout' naming the stalled rank, instead
 * of 'peer-lost' naming this one.
 *
 * [Note: tcp failure state] TcpFailure owns both facts. The links go 'open' ->
 * 'closing-after-delay' (`lossSeen`, `timedOut`) -> 'closed', or 'open' -> 'closed' (`closeNow`),
 * or any -> 'closed' (`engineClosed`); nothing reopens them, and `closeNow` leaves a delayed close
 * pending. The loss notice goes out at most once per engine, only for an error naming a peer,
 * never to that peer, whatever the links' state.
 */
export class TcpFailure {
  #links: LinksState = 'open';
  #noticeReason: LossReason | undefined;
  /** When the delayed close fires (performance.now()), while the links are 'closing-after-delay'. */
  #closeDueAt = 0;

  constructor(private readonly links: readonly (PeerLink | null)[]) {}

  /** The blame for a lost connection was decided: tell the others. */
  lost(error: CollectiveError): void {
    this.#sendNotice(error, 'lost');
  }

  /** [Note: timing out tells the others] */
  timedOut(error: CollectiveError): void {
    this.#sendNotice(error, 'timeout');
    this.lossSeen();
  }

  /** A peer's connection ended, or a peer's loss notice arrived: the links close after the delay. */
  lossSeen(): void {
    if (this.#links !== 'open') return;
    this.#links = 'closing-after-delay';
    this.#closeDueAt = performance.now() + PEER_LOSS_CLOSE_DELAY_MS;
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

  /**
   * [Note: closing after a notice] The engine closes while a delayed close is due (the group is
   * destroyed right after a timeout or a loss): the milliseconds left of the delay, else 0. Until
   * then the engine ends its streams (FIN after the notice) and keeps reading, so the kernel does
   * not answer a peer's unread bytes with a reset that can discard the notice before it is read.
   * It waits less when every link has settled first (each peer ended or lost its connection):
   * everything a peer sent has then been read, so closing sends no reset. A destroy right after
   * an abort, whose sender ends every stream, then takes milliseconds, not the whole delay.
   */
  remainingDelayMs(): number {
    return this.#links === 'closing-after-delay' ? Math.max(0, this.#closeDueAt - performance.now()) : 0;
  }

  engineClosed(): void {
    this.#links = 'closed';
  }

  #close(): void {
    this.#links = 'closed';
    for (const link of this.links) link?.close();
  }

  #sendNotice(error: CollectiveError, reason: LossReason): void {
    if (this.#noticeReason !== undefined || error.peer === undefined) return;
    this.#noticeReason = reason;
    const frame = encodeLossNotice({ lost: error.peer, message: error.message, reason });
    for (const link of this.links) if (link !== null && link.peer !== error.peer) link.write(frame);
  }
}

/** How long a loss seen only on the connection received from waits for more evidence. */
const LOSS_SETTLE_MS = 250;
const LOSS_SETTLE_POLL_MS = 5;

export interface LossBlameHooks {
  isBroken(): boolean;
  decided(error: CollectiveError): void;
}

/**
 * The one owner of whom a lost connection is blamed on ([Note: blaming a lost peer]): idle,
 * deciding (only the connection this rank receives from ended, without a notice: it looks again
 * every LOSS_SETTLE_POLL_MS for LOSS_SETTLE_MS while a failing op waits on `deciding`), decided.
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

  report(loss: ReportedLoss): void {
    this.#reported.push(loss);
    this.#decide();
  }

  /** A verdict found elsewhere (an abort notice, a loss notice where a header belonged). */
  settle(error: CollectiveError): void {
    this.hooks.decided(error);
    this.#pending?.settle(error);
    this.#pending = undefined;
  }

  /**
   * [Note: a notice against a rank that spoke] A peer's notice says rank L was lost, but L may
   * only have closed after failing itself (it timed out on a third rank, whom it told, but not the
   * rank that then saw L's connection end). L wrote its own notice before it closed, so that
   * notice is already here: drained from L's connection, it names the real cause.
   */
  corroborate(error: CollectiveError): CollectiveError {
    if (error.code !== 'peer-lost' || error.peer === undefined) return error;
    const named = this.links[error.peer];
    if (named === undefined || named === null) return error;
    const fd = named.fd();
    if (fd !== undefined && this.sockets !== undefined) drainInto(named, fd, this.sockets);
    const notice = lossNoticeIn(named.unreadBytes());
    if (notice === undefined || notice.lost === this.context.rank) return error;
    return noticeError(named.peer, notice, error);
  }

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

export interface ReportedLoss {
  link: PeerLink;
  error: CollectiveError;
}

interface EndedLink {
  link: PeerLink;
  /** POLLERR/POLLHUP rather than an orderly end. */
  reset: boolean;
  notice: LossNotice | undefined;
}

/**
 * [Note: blaming a lost peer]
 * When one rank dies, every survivor fails its op naming that rank, whatever the interleaving,
 * though a survivor that saw the loss closes its own connections soon after, and a FIN or reset
 * does not say which came first. So a survivor says why it closes: the first time it loses a peer
 * it writes a loss notice (frame-header.ts) on every other connection; a dead rank writes
 * nothing. When a connection ends, `attributeLoss` looks at every connection (those the native
 * poll finds ended too, held ones included, drained to their end; and what the open ones hold):
 * 1. a notice, at the start or the end of a connection's unread bytes, names the rank to blame;
 * 2. else an ended connection other than the one this rank receives from, a reset first (a
 *    survivor sends only headers that way, so its notice cannot be stuck behind bulk bytes);
 * 3. else the connection this rank receives from, once LossBlame waited LOSS_SETTLE_MS for the
 *    dead rank's other connections to end or another survivor's notice to arrive.
 * A notice found where a header is expected fails the op the same way. Without the native path
 * the same rules apply to the ends node:net reports. Measurements: architecture/performance.md.
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

/** A loss notice from `from` as an error: 'peer-lost' naming the lost rank, or 'timeout'. */
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

/** The other connections their peers ended (POLLRDHUP), drained into their queues. */
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

/** A connection ended during a native run: drained into the queue, then failed (or departed). */
export function loseNatively(link: PeerLink, errno: number | undefined, sockets: NativeSockets): void {
  const fd = link.fd();
  if (fd !== undefined) drainInto(link, fd, sockets);
  link.lostNatively(errno);
}
