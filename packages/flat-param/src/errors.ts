/**
 * Errors of @fsdp-ts/flat-param: user errors (bad arguments, wrong state). Every message says what
 * was expected, what came, and how to fix it; the same facts are on typed fields so callers can
 * branch on them. Broken internal invariants are not FlatParamErrors: see internal/assert.ts.
 */
import { FsdpTsError } from '@fsdp-ts/errors';

/** What went wrong, as a FlatParamError's `code`. */
export type FlatParamErrorCode =
  | 'invalid-argument'
  | 'dtype-mismatch'
  | 'duplicate-name'
  | 'unknown-parameter'
  | 'not-full-shape'
  | 'invalid-state'
  | 'invalid-metadata'
  | 'too-large';

/** The typed fields a FlatParamError carries. */
export interface FlatParamErrorDetails {
  code: FlatParamErrorCode;
  expected?: unknown;
  actual?: unknown;
  /** Names of the parameters the error is about, when it is about some. */
  parameters?: readonly string[];
  fix?: string;
  cause?: unknown;
}

export class FlatParamError extends FsdpTsError {
  static override readonly marker: string = 'fsdp-ts.error.FlatParamError';
  readonly code: FlatParamErrorCode;
  readonly parameters: readonly string[];

  constructor(message: string, details: FlatParamErrorDetails) {
    super(message, details);
    this.name = 'FlatParamError';
    this.code = details.code;
    this.parameters = details.parameters ?? [];
  }
}
