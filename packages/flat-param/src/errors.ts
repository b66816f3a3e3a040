/**
 * Errors of @fsdp-ts/flat-param: user errors (bad arguments, wrong state). Every message says what
 * was expected, what came, and how to fix it; the same facts are on typed fields so callers can
 * branch on them. Broken internal invariants are not FlatParamErrors: see internal/assert.ts.
 */
export type FlatParamErrorCode =
  | 'invalid-argument'
  | 'dtype-mismatch'
  | 'duplicate-name'
  | 'unknown-parameter'
  | 'not-full-shape'
  | 'invalid-state'
  | 'invalid-metadata'
  | 'too-large';

export interface FlatParamErrorDetails {
  code: FlatParamErrorCode;
  expected?: unknown;
  actual?: unknown;
  /** Names of the parameters the error is about, when it is about some. */
  parameters?: readonly string[];
  fix?: string;
  cause?: unknown;
}

export class FlatParamError extends Error {
  readonly code: FlatParamErrorCode;
  readonly expected: unknown;
  readonly actual: unknown;
  readonly parameters: readonly string[];
  readonly fix: string | undefined;

  constructor(message: string, details: FlatParamErrorDetails) {
    const fix = details.fix === undefined ? '' : ` Fix: ${details.fix}`;
    super(`${message}${fix}`, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'FlatParamError';
    this.code = details.code;
    this.expected = details.expected;
    this.actual = details.actual;
    this.parameters = details.parameters ?? [];
    this.fix = details.fix;
  }
}
