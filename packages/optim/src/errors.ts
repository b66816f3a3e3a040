/**
 * Errors of @fsdp-ts/optim. Every message says what was expected, what came, and how to fix it;
 * the same facts are typed fields so callers can branch on them.
 */
export type OptimErrorCode =
  | 'invalid-hyperparameter'
  | 'unknown-hyperparameter'
  | 'duplicate-parameter'
  | 'invalid-parameter'
  | 'unsupported-dtype'
  | 'not-contiguous'
  | 'grad-shape-mismatch'
  | 'state-numel-mismatch'
  | 'state-dict-mismatch'
  | 'invalid-group';

export interface OptimErrorDetails {
  code: OptimErrorCode;
  /** The parameter involved, as `Parameter(name: dtype[shape])`, when there is one. */
  parameter?: string;
  expected?: unknown;
  actual?: unknown;
  fix?: string;
  cause?: unknown;
}

export class OptimError extends Error {
  readonly code: OptimErrorCode;
  readonly parameter: string | undefined;
  readonly expected: unknown;
  readonly actual: unknown;
  readonly fix: string | undefined;

  constructor(message: string, details: OptimErrorDetails) {
    const fix = details.fix === undefined ? '' : ` Fix: ${details.fix}`;
    super(`${message}${fix}`, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'OptimError';
    this.code = details.code;
    this.parameter = details.parameter;
    this.expected = details.expected;
    this.actual = details.actual;
    this.fix = details.fix;
  }
}
