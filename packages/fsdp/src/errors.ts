/**
 * Errors of @fsdp-ts/fsdp. Messages say what was expected, what came, and how to fix it; the
 * facts are on typed fields too.
 */
export type FsdpErrorCode =
  | 'invalid-option'
  | 'structure-mismatch'
  | 'unsupported-model'
  | 'wrong-state'
  | 'state-dict-mismatch'
  | 'not-a-member'
  /** An exception in forward or backward on some rank broke the group on every rank ([Note: step failure]). */
  | 'step-failed';

export interface FsdpErrorDetails {
  code: FsdpErrorCode;
  rank?: number;
  expected?: unknown;
  actual?: unknown;
  fix?: string;
  cause?: unknown;
}

export class FsdpError extends Error {
  readonly code: FsdpErrorCode;
  readonly rank: number | undefined;
  readonly expected: unknown;
  readonly actual: unknown;
  readonly fix: string | undefined;

  constructor(message: string, details: FsdpErrorDetails) {
    const fix = details.fix === undefined ? '' : ` Fix: ${details.fix}`;
    super(`${message}${fix}`, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'FsdpError';
    this.code = details.code;
    this.rank = details.rank;
    this.expected = details.expected;
    this.actual = details.actual;
    this.fix = details.fix;
  }
}
