/**
 * Errors of @fsdp-ts/collectives. Messages say what was expected, what came, and how to fix it;
 * the facts are also typed fields (rank, op, peer) so callers and launchers can branch on them.
 */
import { FsdpTsError } from '@fsdp-ts/errors';

export type CollectiveErrorCode =
  | 'timeout'
  | 'peer-lost'
  | 'mismatch'
  | 'invalid-argument'
  | 'closed'
  | 'auth'
  | 'malformed-frame'
  | 'store'
  | 'launch';

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

export class CollectiveError extends FsdpTsError {
  static override readonly marker: string = 'fsdp-ts.error.CollectiveError';
  readonly code: CollectiveErrorCode;
  readonly op: string | undefined;
  readonly rank: number | undefined;
  readonly peer: number | undefined;

  constructor(message: string, details: CollectiveErrorDetails) {
    super(message, details);
    this.name = 'CollectiveError';
    this.code = details.code;
    this.op = details.op;
    this.rank = details.rank;
    this.peer = details.peer;
  }
}
