/**
 * Errors of @fsdp-ts/tensor. Every message says what was expected, what came, and how to fix it;
 * the same facts are on typed fields so callers can branch on them.
 */
export type TensorErrorCode =
  | 'storage-freed'
  | 'view-out-of-bounds'
  | 'shape-mismatch'
  | 'dtype-mismatch'
  | 'not-contiguous'
  | 'invalid-argument'
  | 'backend-unavailable'
  | 'backend-not-initialised';

export interface TensorErrorDetails {
  code: TensorErrorCode;
  expected?: unknown;
  actual?: unknown;
  fix?: string;
  cause?: unknown;
}

export class TensorError extends Error {
  readonly code: TensorErrorCode;
  readonly expected: unknown;
  readonly actual: unknown;
  readonly fix: string | undefined;

  constructor(message: string, details: TensorErrorDetails) {
    const fix = details.fix === undefined ? '' : ` Fix: ${details.fix}`;
    super(`${message}${fix}`, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'TensorError';
    this.code = details.code;
    this.expected = details.expected;
    this.actual = details.actual;
    this.fix = details.fix;
  }
}

/** Reading or writing through a Storage whose memory was released with `free()`. */
export class StorageFreedError extends TensorError {
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
