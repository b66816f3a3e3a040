/**
 * Errors of @fsdp-ts/tensor. Every message says what was expected, what came, and how to fix it;
 * the same facts are on typed fields so callers can branch on them.
 */
import { FsdpTsError } from '@fsdp-ts/errors';

/** What went wrong, as a TensorError's `code`. */
export type TensorErrorCode =
  | 'storage-freed'
  | 'view-out-of-bounds'
  | 'shape-mismatch'
  | 'dtype-mismatch'
  | 'not-contiguous'
  | 'invalid-argument'
  /** An options object has a key its interface does not declare (see [Note: option keys] in @fsdp-ts/errors). */
  | 'unknown-option'
  | 'backend-unavailable'
  | 'backend-not-initialised';

/** The typed fields a TensorError carries. */
export interface TensorErrorDetails {
  code: TensorErrorCode;
  expected?: unknown;
  actual?: unknown;
  fix?: string;
  cause?: unknown;
}

export class TensorError extends FsdpTsError {
  static override readonly marker: string = 'fsdp-ts.error.TensorError';
  readonly code: TensorErrorCode;

  constructor(message: string, details: TensorErrorDetails) {
    super(message, details);
    this.name = 'TensorError';
    this.code = details.code;
  }
}

/** Reading or writing through a Storage whose memory was released with `free()`. */
export class StorageFreedError extends TensorError {
  static override readonly marker: string = 'fsdp-ts.error.StorageFreedError';
  constructor(what: string) {
    super(`Cannot ${what}: the storage was freed (expected an allocated storage, got a freed one).`, {
      code: 'storage-freed',
      expected: 'allocated',
      actual: 'freed',
      fix: 'call storage.allocate() first, or keep the view only while its storage is allocated (FSDP frees unsharded buffers on reshard).',
    });
    this.name = 'StorageFreedError';
  }
}

/** Formats a shape the way every message in this package prints one. */
export function formatShape(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}
