import type { CollectiveError } from '../../errors.js';
import { encodeLossNotice, type LossReason } from './frame-header.js';
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
