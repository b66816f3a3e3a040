import { FsdpTsError, type FsdpTsErrorDetails } from '@fsdp-ts/errors';

/**
 * Errors of @fsdp-ts/collectives. Messages say what was expected, what came, and how to fix it;
 * the facts are also typed fields (rank, op, peer) so callers and launchers can branch on them.
 */

export type CollectiveErrorCode =
  | 'timeout'
  | 'peer-lost'
  | 'mismatch'
  | 'invalid-argument'
  /** An options object (or an fsdp-run flag) that its interface does not declare. */
  | 'unknown-option'
  | 'closed'
  | 'auth'
  | 'malformed-frame'
  | 'store'
  | 'launch'
  /** A rank called `group.abort(error)`: the group is broken on every rank with that rank's error. */
  | 'aborted';

/** The typed fields a CollectiveError carries (code, op, rank, peer, expected, actual, fix, cause). */
export interface CollectiveErrorDetails extends FsdpTsErrorDetails {
  /** What went wrong. */
  code: CollectiveErrorCode;
  /** The operation that failed. */
  op?: string;
  /** This process's rank. */
  rank?: number;
  /** The peer rank involved. */
  peer?: number;
}

/**
 * The error every collective, store and launcher failure throws: a code, the op, the rank and peer, what
 * was expected and what came, and how to fix it. It is an FsdpTsError (@fsdp-ts/errors), so
 * `FsdpTsError.isInstance(error)`, `CollectiveError.isInstance(error)` and `instanceof` recognise it
 * from any copy of either package ([Note: errors across package copies]). The communication worker
 * bundles or imports @fsdp-ts/errors like the rest of the package ([Note: worker entries] in
 * internal/start-worker.ts).
 */
export class CollectiveError extends FsdpTsError {
  static override readonly marker: string = 'fsdp-ts.error.CollectiveError';
  /** What went wrong, as one of CollectiveErrorCode's values. */
  readonly code: CollectiveErrorCode;
  /** The operation that failed (e.g. 'allReduce'), when one did. */
  readonly op: string | undefined;
  /** This process's rank in the group, when known. */
  readonly rank: number | undefined;
  /** The peer rank involved, when one was. */
  readonly peer: number | undefined;

  constructor(message: string, details: CollectiveErrorDetails) {
    super(message, details);
    // Named here, not only by the base's new.target: a bundler may rename the class.
    this.name = 'CollectiveError';
    this.code = details.code;
    this.op = details.op;
    this.rank = details.rank;
    this.peer = details.peer;
  }
}
