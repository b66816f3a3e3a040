/**
 * Errors of @fsdp-ts/layers. Messages say what was expected, what came, and how to fix it; the
 * facts are on typed fields too. `LayersError.isInstance` and `instanceof` recognise errors from
 * another copy of this package ([Note: errors across package copies] in @fsdp-ts/errors).
 */
import { FsdpTsError } from '@fsdp-ts/errors';

/** What went wrong, as a LayersError's `code`. */
export type LayersErrorCode =
  | 'invalid-option'
  /** An options object has a key its interface does not declare (see [Note: option keys] in @fsdp-ts/errors). */
  | 'unknown-option'
  | 'invalid-data'
  | 'replica-mismatch'
  | 'unsupported-model'
  | 'not-compiled'
  | 'checkpoint-mismatch'
  | 'checkpoint-failed'
  | 'checkpoint-corrupt'
  /** A checkpoint in a format this version does not read (the old layers format). */
  | 'checkpoint-format';

/** The typed fields a LayersError carries. */
export interface LayersErrorDetails {
  code: LayersErrorCode;
  rank?: number;
  /** The weight involved (its tfjs name), when there is one. */
  weight?: string;
  expected?: unknown;
  actual?: unknown;
  fix?: string;
  cause?: unknown;
}

export class LayersError extends FsdpTsError {
  static override readonly marker: string = 'fsdp-ts.error.LayersError';
  readonly code: LayersErrorCode;
  readonly rank: number | undefined;
  readonly weight: string | undefined;
  constructor(message: string, details: LayersErrorDetails) {
    super(message, details);
    this.name = 'LayersError';
    this.code = details.code;
    this.rank = details.rank;
    this.weight = details.weight;
  }
}
