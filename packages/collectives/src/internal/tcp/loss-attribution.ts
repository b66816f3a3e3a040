import { CollectiveError } from '../../errors.js';
import { type LossNotice, lossNoticeIn } from './frame-header.js';
import { type NativeSockets, POLLERR, POLLHUP, POLLRDHUP, PollSet } from './native-sockets.js';
import type { PeerLink } from './peer-link.js';

/** Most bytes read from one closed connection while looking for a loss notice at its end. */
const MAX_DRAIN_BYTES = 64 << 20;

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
 * a reset tells which came first. Measured (3 ranks, 64 MiB all-reduce, rank 1 killed, load 8):
 * rank 0 blamed rank 2 in 3 of 18 runs, in every one because rank 0 (descheduled, or reading
 * only the connection it receives from) found both ended at once, and `lost` in native-ring.ts
 * preferred the connection it receives from. And while an op waits for headers, node:net does
 * not report the end of a connection whose reading is held ([Note: held reading]): only the
 * survivor's close, later, is seen.
 * So a survivor says why it closes: the first time a rank loses a peer, before anything of its
 * own closes, it writes a loss notice (the lost rank and its own words; see frame-header.ts) on
 * every other connection. A dead rank writes nothing. When a rank first sees a connection end
 * (node:net's close or error, or the native path's `lost`), `attributeLoss` looks at every
 * connection: those the native poll finds ended too (held ones included), their unread bytes
 * read to the end of the stream. Then:
 * 1. a notice at the start or at the end of what an ended connection left unread names the rank
 *    to blame (the survivor who wrote it saw the loss first-hand);
 * 2. otherwise an ended connection other than the one this rank receives from in the ring, a
 *    reset first: a survivor's notice cannot be missed there (it sends that way at most headers,
 *    so the notice is not stuck behind bulk bytes), while the connection this rank receives from
 *    may carry a survivor's notice stuck behind the bulk bytes or already taken as payload;
 * 3. otherwise the connection that ended first.
 * A notice found where a header is expected fails the op the same way. Without the native path
 * (TLS, or FSDP_TCP_NATIVE=0) nothing is held, node:net reports ends in the order they happen,
 * and rule 1 applies to the connection that ended.
 */
export function attributeLoss(
  reporter: PeerLink,
  error: CollectiveError,
  links: readonly (PeerLink | null)[],
  sockets: NativeSockets | undefined,
  context: { rank: number; previous: number },
): CollectiveError {
  const ended = [
    { link: reporter, reset: false, notice: lossNoticeIn(reporter.unreadBytes()) },
    ...(sockets === undefined ? [] : endedNatively(links, reporter, sockets)),
  ];
  const told = ended.find(
    (candidate) => candidate.notice !== undefined && candidate.notice.lost !== context.rank,
  );
  if (told !== undefined) return noticeError(told.link.peer, told.notice!, error);
  const rank = (candidate: EndedLink) =>
    (candidate.link.peer === context.previous ? 2 : 0) + (candidate.reset ? 0 : 1);
  const blamed = ended.reduce((best, candidate) => (rank(candidate) < rank(best) ? candidate : best));
  if (blamed.link === reporter) return error;
  return new CollectiveError(`rank ${blamed.link.peer} closed the connection`, {
    code: 'peer-lost',
    peer: blamed.link.peer,
    cause: error,
  });
}

/** The error a loss notice from `from` stands for: the rank it names was lost. */
export function noticeError(from: number, notice: LossNotice, cause?: unknown): CollectiveError {
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
  reporter: PeerLink,
  sockets: NativeSockets,
): EndedLink[] {
  const polled: PeerLink[] = [];
  const polls = new PollSet(links.length);
  for (const link of links) {
    const fd = link === null || link === reporter ? undefined : link.fd();
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
