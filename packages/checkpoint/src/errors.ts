import { checkOptionKeys, type ForeignNames, FsdpTsError } from '@fsdp-ts/errors';

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
 *   inside a step): nothing was written or read;
 * - `unknown-option`: an options object has a key its interface does not declare (see
 *   [Note: option keys] in @fsdp-ts/errors); its `code` is 'unknown-option'.
 */
export type CheckpointErrorReason =
  | 'missing'
  | 'truncated'
  | 'corrupt'
  | 'model-mismatch'
  | 'optimizer-mismatch'
  | 'peer-failed'
  | 'io'
  | 'invalid-input'
  | 'unknown-option';

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

/**
 * The `code` of a CheckpointError: 'unknown-option' for an options key no interface declares,
 * 'state-dict-mismatch' for everything else (the FsdpError code checkpoint errors always had).
 */
export type CheckpointErrorCode = 'state-dict-mismatch' | 'unknown-option';

/**
 * [Note: a CheckpointError is an FsdpError]
 * Before @fsdp-ts/checkpoint existed, CheckpointError lived in @fsdp-ts/fsdp and extended
 * FsdpError, and applications catch checkpoint failures of saveCheckpoint / loadCheckpoint with
 * `error instanceof FsdpError` and read `error.code` and `error.rank`. @fsdp-ts/checkpoint cannot
 * import @fsdp-ts/fsdp (fsdp imports it), so CheckpointError extends the shared FsdpTsError and
 * carries FsdpError's marker as well as its own ([Note: errors across package copies] in
 * @fsdp-ts/errors): `FsdpError.isInstance(error)` and `error instanceof FsdpError` stay true for
 * every CheckpointError, and it keeps FsdpError's `code` and `rank` fields. Removing the marker
 * breaks those catch blocks without a type error.
 */
const FSDP_ERROR_MARKER = 'fsdp-ts.error.FsdpError';

/**
 * Errors of the checkpoint format (write, read, verification), safetensors and the state dicts
 * of flat layouts. Also an FsdpError (see [Note: a CheckpointError is an FsdpError]).
 */
export class CheckpointError extends FsdpTsError {
  static override readonly marker: string = 'fsdp-ts.error.CheckpointError';
  readonly reason: CheckpointErrorReason;
  /** 'unknown-option' for an unknown options key, otherwise 'state-dict-mismatch'. */
  readonly code: CheckpointErrorCode;
  /** The rank that threw, when known (set on the failing rank by the group's failure check). */
  readonly rank: number | undefined;
  /** FsdpError's field; always undefined for a checkpoint error. */
  readonly groupBroken: boolean | undefined = undefined;
  readonly file: string | undefined;
  readonly parameters: readonly string[];

  constructor(message: string, details: CheckpointErrorDetails) {
    super(message, {
      expected: details.expected,
      actual: details.actual,
      ...(details.fix === undefined ? {} : { fix: details.fix }),
      ...(details.cause === undefined ? {} : { cause: details.cause }),
    });
    Object.defineProperty(this, Symbol.for(FSDP_ERROR_MARKER), { value: true });
    this.name = 'CheckpointError';
    this.reason = details.reason;
    this.code = details.reason === 'unknown-option' ? 'unknown-option' : 'state-dict-mismatch';
    this.rank = details.rank;
    this.file = details.file;
    this.parameters = details.parameters ?? [];
  }
}

/**
 * Throws CheckpointError('unknown-option') for a key outside `known` (see [Note: option keys] in
 * @fsdp-ts/errors).
 */
export function checkCheckpointOptionKeys(
  where: string,
  options: unknown,
  known: Readonly<Record<string, true>>,
  foreign: ForeignNames = {},
): void {
  checkOptionKeys(where, options, known, foreign, (message, details) => {
    return new CheckpointError(message, { ...details, reason: 'unknown-option' });
  });
}
