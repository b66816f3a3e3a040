import type { OpHeader } from './op-header.js';

/**
 * [Note: failure agreement]
 * `group.recoverOrAbort(error)` lets ranks that all failed alike outside the collectives (the same
 * bad batch everywhere) keep their group, where `group.abort(error)` ([Note: abort]) always breaks
 * it. It is an op in the rank's queue, so it runs after every op the rank issued before it; there
 * the rank sends every peer a failure notice and reads one reply from each, in the place where the
 * peer's next op header belongs:
 * - the notice carries the op's sequence number (one more than the collectives this rank issued on
 *   the group) and the failure's fingerprint (its name, code and message, see `failureFingerprint`);
 * - every peer replied with a notice of the same sequence number and fingerprint: the ranks failed
 *   at the same point of the op stream with the same error. Nothing was aborted, the streams stay
 *   aligned, and the group goes on ('recovered' on every rank: each saw the same set of notices);
 * - any other reply (a peer's op header: it did not fail, or failed later; a notice with another
 *   sequence number or fingerprint), an abort or loss notice, a lost connection or the op's
 *   timeout: the rank aborts the group as `group.abort` would, with its own message, and
 *   recoverOrAbort returns the reason. Every rank that sent a notice reads every peer's reply, so
 *   each of them sees the disagreement and aborts.
 * A rank that did not fail and reads a notice where an op header belongs (it is blocked in, or
 * starts, an op the failing rank never issues) breaks the group at once with the notice's message
 * (code 'aborted', `peer` the failing rank), as for an abort notice; it sends nothing, since the
 * failing rank aborts once it reads that rank's op header. So a one-sided failure releases the
 * other ranks as fast as an abort does. The wait of a failing rank is bounded by the op timeout:
 * a peer that neither fails nor issues another op (it computes for a long time) keeps it waiting
 * until then. Send and recv have their own sequences and are not compared.
 */
export interface FailureNotice {
  /** The agreement's sequence number in the group's collective sequence. */
  seq: number;
  fingerprint: string;
  /** The failure as the peers report it if they cannot agree (the abort message). */
  message: string;
}

/** What a peer put where its next op header belongs. */
export type NoticeReply = { type: 'notice'; notice: FailureNotice } | { type: 'op'; header: OpHeader };

/** Why `reply` from `peer` disagrees with `mine`; undefined when it agrees. */
export function disagreement(mine: FailureNotice, peer: number, reply: NoticeReply): string | undefined {
  if (reply.type === 'op')
    return `rank ${peer} did not fail there: it issued ${reply.header.kind} #${reply.header.seq}`;
  const theirs = reply.notice;
  if (theirs.seq !== mine.seq)
    return `rank ${peer} failed after ${theirs.seq - 1} collectives on the group, this rank after ${mine.seq - 1}`;
  if (theirs.fingerprint !== mine.fingerprint)
    return `rank ${peer} failed with another error: ${theirs.message}`;
  return undefined;
}
