/**
 * Errors of @fsdp-ts/collectives. Messages say what was expected, what came, and how to fix it;
 * the facts are also typed fields (rank, op, peer) so callers and launchers can branch on them.
 */
export type CollectiveErrorCode =
  | 'timeout'
  | 'peer-lost'
  | 'mismatch'
  | 'invalid-argument'
  | 'closed'
  | 'auth'
  | 'malformed-frame'
  | 'store'
  | 'launch'
  /** A rank called `group.abort(error)`: the group is broken on every rank with that rank's error. */
  | 'aborted';

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

export class CollectiveError extends Error {
  readonly code: CollectiveErrorCode;
  readonly op: string | undefined;
  readonly rank: number | undefined;
  readonly peer: number | undefined;
  readonly expected: unknown;
  readonly actual: unknown;
  readonly fix: string | undefined;

  constructor(message: string, details: CollectiveErrorDetails) {
    const fix = details.fix === undefined ? '' : ` Fix: ${details.fix}`;
    super(`${message}${fix}`, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'CollectiveError';
    this.code = details.code;
    this.op = details.op;
    this.rank = details.rank;
    this.peer = details.peer;
    this.expected = details.expected;
    this.actual = details.actual;
    this.fix = details.fix;
  }
}
