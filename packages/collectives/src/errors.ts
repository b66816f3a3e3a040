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
export interface CollectiveErrorDetails {
  code: CollectiveErrorCode;
  op?: string;
  rank?: number;
  peer?: number;
  expected?: unknown;
  actual?: unknown;
  fix?: string;
  cause?: unknown;
}

/**
 * [Note: collectives errors without @fsdp-ts/errors]
 * This package imports no other project package (its communication worker is bundled alone), so
 * CollectiveError implements the marker protocol of @fsdp-ts/errors' FsdpTsError structurally
 * ([Note: errors across package copies]): it carries `Symbol.for('fsdp-ts.error')` and its own
 * marker, so `FsdpTsError.isInstance(error)`, `CollectiveError.isInstance(error)` and `instanceof`
 * recognise it from any copy. Keep the two marker strings in step with that package.
 */
const baseMarker = Symbol.for('fsdp-ts.error');

/**
 * The error every collective, store and launcher failure throws: a code, the op, the rank and peer, what
 * was expected and what came, and how to fix it.
 */
export class CollectiveError extends Error {
  static readonly marker: string = 'fsdp-ts.error.CollectiveError';
  /** What the code expected (from the details). */
  readonly expected: unknown;
  /** What came instead (from the details). */
  readonly actual: unknown;
  /** How to fix it; the message ends with it as " Fix: …". */
  readonly fix: string | undefined;
  /** What went wrong, as one of CollectiveErrorCode's values. */
  readonly code: CollectiveErrorCode;
  /** The operation that failed (e.g. 'allReduce'), when one did. */
  readonly op: string | undefined;
  /** This process's rank in the group, when known. */
  readonly rank: number | undefined;
  /** The peer rank involved, when one was. */
  readonly peer: number | undefined;

  constructor(message: string, details: CollectiveErrorDetails) {
    const fix = details.fix === undefined ? '' : ` Fix: ${details.fix}`;
    super(`${message}${fix}`, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'CollectiveError';
    this.expected = details.expected;
    this.actual = details.actual;
    this.fix = details.fix;
    Object.defineProperty(this, baseMarker, { value: true });
    Object.defineProperty(this, Symbol.for(CollectiveError.marker), { value: true });
    this.code = details.code;
    this.op = details.op;
    this.rank = details.rank;
    this.peer = details.peer;
  }

  /** Whether `value` is a CollectiveError from any copy of this package. */
  static isInstance(value: unknown): value is CollectiveError {
    const key = Symbol.for(CollectiveError.marker);
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[key] === true;
  }

  /** True for a CollectiveError from any copy of this package (matched by its `Symbol.for` marker). */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return CollectiveError.isInstance(value);
  }
}
