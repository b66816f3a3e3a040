/**
 * Errors of @fsdp-ts/fsdp. Messages say what was expected, what came, and how to fix it; the
 * facts are on typed fields too.
 */
import { FsdpTsError } from '@fsdp-ts/errors';

/** What went wrong, as an FsdpError's `code`. */
export type FsdpErrorCode =
  | 'invalid-option'
  /** An options object has a key its interface does not declare (see [Note: option keys] in @fsdp-ts/errors). */
  | 'unknown-option'
  | 'structure-mismatch'
  | 'unsupported-model'
  | 'wrong-state'
  | 'state-dict-mismatch'
  | 'not-a-member'
  /**
   * An exception in forward, the loss or backward failed the step on every rank ([Note: step
   * failure]); `groupBroken` says whether the group is broken or every rank failed alike and it
   * stays usable.
   */
  | 'step-failed'
  /**
   * Offloaded state could not be read, verified or written (a changed byte, a full disk); every
   * rank throws it and the model and its optimizer state stay what they were. `file` names the file.
   */
  | 'offload-failed';

/** The typed fields an FsdpError carries. */
export interface FsdpErrorDetails {
  code: FsdpErrorCode;
  rank?: number;
  expected?: unknown;
  actual?: unknown;
  fix?: string;
  cause?: unknown;
  /** 'step-failed': whether the process group is broken (false: every rank failed alike, it stays usable). */
  groupBroken?: boolean;
  /** 'offload-failed': the offload file involved. */
  file?: string;
}

export class FsdpError extends FsdpTsError {
  static override readonly marker: string = 'fsdp-ts.error.FsdpError';
  readonly code: FsdpErrorCode;
  readonly rank: number | undefined;
  /** 'step-failed': whether the process group is broken; undefined for other codes. */
  readonly groupBroken: boolean | undefined;
  /** 'offload-failed': the offload file involved; undefined for other codes. */
  readonly file: string | undefined;

  constructor(message: string, details: FsdpErrorDetails) {
    super(message, details);
    this.name = 'FsdpError';
    this.code = details.code;
    this.rank = details.rank;
    this.groupBroken = details.groupBroken;
    this.file = details.file;
  }
}
