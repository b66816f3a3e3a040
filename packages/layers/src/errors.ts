/**
 * Errors of @fsdp-ts/layers. Messages say what was expected, what came, and how to fix it; the
 * facts are on typed fields too. `LayersError.isInstance` recognises errors from another copy of
 * this package (a `Symbol.for` marker), where `instanceof` would not.
 */
export type LayersErrorCode =
  | 'invalid-option'
  | 'invalid-data'
  | 'replica-mismatch'
  | 'unsupported-model'
  | 'not-compiled'
  | 'checkpoint-mismatch';

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

const marker = Symbol.for('@fsdp-ts/layers.LayersError');

export class LayersError extends Error {
  readonly code: LayersErrorCode;
  readonly rank: number | undefined;
  readonly weight: string | undefined;
  readonly expected: unknown;
  readonly actual: unknown;
  readonly fix: string | undefined;
  constructor(message: string, details: LayersErrorDetails) {
    const fix = details.fix === undefined ? '' : ` Fix: ${details.fix}`;
    super(`${message}${fix}`, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'LayersError';
    this.code = details.code;
    this.rank = details.rank;
    this.weight = details.weight;
    this.expected = details.expected;
    this.actual = details.actual;
    this.fix = details.fix;
    Object.defineProperty(this, marker, { value: true });
  }

  static isInstance(value: unknown): value is LayersError {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[marker] === true;
  }
}
