/**
 * Errors of @fsdp-ts/optim. Every message says what was expected, what came, and how to fix it;
 * the same facts are typed fields so callers can branch on them.
 */
import { FsdpTsError } from '@fsdp-ts/errors';

/** What went wrong, as an OptimError's `code`. */
export type OptimErrorCode =
  | 'invalid-hyperparameter'
  | 'unknown-hyperparameter'
  /** An options object (not hyperparameters) has a key its interface does not declare. */
  | 'unknown-option'
  | 'duplicate-parameter'
  | 'invalid-parameter'
  | 'unsupported-dtype'
  | 'not-contiguous'
  | 'grad-shape-mismatch'
  | 'state-numel-mismatch'
  | 'state-dict-mismatch'
  | 'invalid-group'
  /** The optimizer cannot step state kept elsewhere (see OptimizerStateOffload). */
  | 'offload-unsupported';

/** The typed fields an OptimError carries. */
export interface OptimErrorDetails {
  code: OptimErrorCode;
  /** The parameter involved, as `Parameter(name: dtype[shape])`, when there is one. */
  parameter?: string;
  expected?: unknown;
  actual?: unknown;
  fix?: string;
  cause?: unknown;
}

export class OptimError extends FsdpTsError {
  static override readonly marker: string = 'fsdp-ts.error.OptimError';
  readonly code: OptimErrorCode;
  readonly parameter: string | undefined;

  constructor(message: string, details: OptimErrorDetails) {
    super(message, details);
    this.name = 'OptimError';
    this.code = details.code;
    this.parameter = details.parameter;
  }
}
