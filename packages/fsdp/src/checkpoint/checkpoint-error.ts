import { FsdpError } from '../errors';

/**
 * What went wrong with a checkpoint:
 * - `missing`: a file or directory the checkpoint needs is not there;
 * - `truncated`: a data file is shorter than its recorded size;
 * - `corrupt`: bytes do not match their SHA-256, or a file is not what the format says;
 * - `model-mismatch`: the checkpoint's parameters (names, shapes, dtypes) differ from the model's;
 * - `optimizer-mismatch`: the saved optimizer state does not fit the optimizer;
 * - `peer-failed`: another rank failed (its own error names the file and parameter);
 * - `io`: the file system refused a read or write;
 * - `invalid-input`: what the caller gave is not what a checkpoint can take (a buffer's dtype,
 *   shape or values, a document, a name, `extra` that is not JSON; a hybrid-shard model, a unit
 *   inside a step): nothing was written or read.
 */
export type CheckpointErrorReason =
  | 'missing'
  | 'truncated'
  | 'corrupt'
  | 'model-mismatch'
  | 'optimizer-mismatch'
  | 'peer-failed'
  | 'io'
  | 'invalid-input';

/** The typed fields a CheckpointError carries. */
export interface CheckpointErrorDetails {
  reason: CheckpointErrorReason;
  /** The file (or directory) concerned. */
  file?: string;
  /** The parameter(s) whose bytes live in the concerned range. */
  parameters?: readonly string[];
  rank?: number;
  expected?: unknown;
  actual?: unknown;
  fix?: string;
  cause?: unknown;
}

/** Errors of saveCheckpoint / loadCheckpoint and the safetensors functions (an FsdpError). */
export class CheckpointError extends FsdpError {
  static override readonly marker: string = 'fsdp-ts.error.CheckpointError';
  readonly reason: CheckpointErrorReason;
  readonly file: string | undefined;
  readonly parameters: readonly string[];

  constructor(message: string, details: CheckpointErrorDetails) {
    super(message, {
      code: 'state-dict-mismatch',
      ...(details.rank === undefined ? {} : { rank: details.rank }),
      expected: details.expected,
      actual: details.actual,
      ...(details.fix === undefined ? {} : { fix: details.fix }),
      ...(details.cause === undefined ? {} : { cause: details.cause }),
    });
    this.name = 'CheckpointError';
    this.reason = details.reason;
    this.file = details.file;
    this.parameters = details.parameters ?? [];
  }
}
