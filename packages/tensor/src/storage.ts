import type { OptionKeys } from '@fsdp-ts/errors';
import { type DType, itemSize, type TypedArray, typedArrayFor } from './dtype/dtype';
import { StorageFreedError, TensorError } from './errors';
import { checkTensorOptionKeys } from './internal/check-option-keys';
import { storagePool } from './storage-pool';

/** Every storage's byte length is a multiple of this, and its data starts at a multiple of it. */
export const STORAGE_ALIGNMENT_BYTES = 64;

/** Options of a Storage. */
export interface StorageOptions {
  /** Back the storage with a SharedArrayBuffer (needed for anything worker threads touch). */
  shared?: boolean;
  /**
   * Take memory from, and give it back on `free()` to, the storage pool (see [Note: storage
   * pool]): for storages freed and re-allocated again and again, when nothing else holds their
   * memory once freed.
   */
  pooled?: boolean;
}

/** The keys of StorageOptions ([Note: option keys] in @fsdp-ts/errors). */
export const storageOptionKeys = { shared: true, pooled: true } as const satisfies OptionKeys<StorageOptions>;

let nextStorageId = 1;

/**
 * One contiguous allocation of `numel` elements of a dtype.
 *
 * [Note: storage lifecycle]
 * A storage is 'allocated' or 'freed'. `free()` drops the memory but keeps the object, so views
 * of it stay valid objects; `allocate()` re-creates the memory at the same size (contents are
 * zero). Reading through a freed storage throws StorageFreedError. This is PyTorch's
 * `storage.resize_(0)` trick: FSDP frees a unit's unsharded buffer on reshard while every
 * Parameter view of it stays in place, and re-allocates it on the next unshard.
 *
 * Invariant: while allocated, `array()` has exactly `numel` elements and starts at byte offset
 * `byteOffset` of `buffer()`, a multiple of STORAGE_ALIGNMENT_BYTES.
 */
export class Storage {
  readonly id = nextStorageId++;
  readonly dtype: DType;
  readonly numel: number;
  readonly shared: boolean;
  /** Bytes of the elements (numel × item size); the allocation rounds this up to 64 bytes. */
  readonly byteLength: number;
  /** Memory comes from and returns to the storage pool (see [Note: storage pool]). */
  readonly pooled: boolean;
  private memory: TypedArray | null;
  private readonly external: boolean;

  private constructor(
    dtype: DType,
    numel: number,
    shared: boolean,
    memory: TypedArray | null,
    external: boolean,
    pooled = false,
  ) {
    this.dtype = dtype;
    this.numel = numel;
    this.shared = shared;
    this.byteLength = numel * itemSize(dtype);
    this.memory = memory;
    this.external = external;
    this.pooled = pooled;
  }

  /** Allocates a zero-filled storage. Zero-size storages are legal. */
  static allocate(dtype: DType, numel: number, options: StorageOptions = {}): Storage {
    checkTensorOptionKeys('Storage options', options, storageOptionKeys);
    checkNumel(numel);
    const shared = options.shared ?? false;
    const storage = new Storage(dtype, numel, shared, null, false, options.pooled ?? false);
    storage.allocate();
    return storage;
  }

  /**
   * A storage without memory yet (state 'freed' from the start): `allocate()` creates it, zero
   * filled. For buffers that exist only some of the time (a unit's unsharded buffer) and for the
   * values of a deferred Parameter (see [Note: deferred parameters]), so that nothing is allocated
   * only to be dropped.
   */
  static unallocated(dtype: DType, numel: number, options: StorageOptions = {}): Storage {
    checkTensorOptionKeys('Storage options', options, storageOptionKeys);
    checkNumel(numel);
    return new Storage(dtype, numel, options.shared ?? false, null, false, options.pooled ?? false);
  }

  /**
   * Wraps memory someone else owns (a received buffer, a slab of a bigger SharedArrayBuffer).
   * `byteOffset` must be a multiple of the item size. `free()` only drops the reference.
   */
  static wrap(dtype: DType, buffer: ArrayBufferLike, byteOffset: number, numel: number): Storage {
    checkNumel(numel);
    if (byteOffset % itemSize(dtype) !== 0) {
      throw new TensorError(
        `Storage.wrap: byte offset ${byteOffset} is not a multiple of ${dtype}'s item size.`,
        {
          code: 'invalid-argument',
          expected: `a multiple of ${itemSize(dtype)}`,
          actual: byteOffset,
          fix: 'align the offset to the element size.',
        },
      );
    }
    const array = typedArrayFor(dtype, buffer, byteOffset, numel);
    const shared = typeof SharedArrayBuffer !== 'undefined' && buffer instanceof SharedArrayBuffer;
    return new Storage(dtype, numel, shared, array, true);
  }

  /** Wraps an existing typed array of the dtype's word type, without copying. */
  static fromTypedArray(dtype: DType, array: TypedArray): Storage {
    return Storage.wrap(dtype, array.buffer, array.byteOffset, array.length);
  }

  /** True while the storage holds memory. */
  get isAllocated(): boolean {
    return this.memory !== null;
  }

  /** The elements, aliasing the memory (no copy). Throws if freed. */
  array(): TypedArray {
    if (this.memory === null)
      throw new StorageFreedError(`read storage #${this.id} (${this.dtype}[${this.numel}])`);
    return this.memory;
  }

  /** The underlying buffer. Throws if freed. */
  buffer(): ArrayBufferLike {
    return this.array().buffer;
  }

  /** Byte offset of element 0 within `buffer()`. */
  byteOffset(): number {
    return this.array().byteOffset;
  }

  /** Releases the memory; the object and every view of it stay. Idempotent. */
  free(): void {
    if (this.pooled && this.memory !== null) storagePool.give(this.memory.buffer);
    this.memory = null;
  }

  /**
   * Re-creates the memory at the same size, zero-filled. Does nothing if already allocated.
   * `{ zeroed: false }` skips zeroing memory reused from the storage pool (it then holds its last
   * owner's bytes): only for memory the caller overwrites, or zeroes the rest of, before anything
   * reads it, such as an all-gather's output or an unsharded gradient buffer.
   */
  allocate(options: { zeroed?: boolean } = {}): void {
    if (this.memory !== null) return;
    if (this.external) {
      throw new TensorError(`Cannot re-allocate storage #${this.id}: it wraps memory it does not own.`, {
        code: 'invalid-argument',
        expected: 'a storage created by Storage.allocate',
        actual: 'a wrapped (external) storage',
        fix: 'allocate a new Storage instead of re-allocating a wrapped one.',
      });
    }
    const bytes = Math.ceil(this.byteLength / STORAGE_ALIGNMENT_BYTES) * STORAGE_ALIGNMENT_BYTES;
    const buffer = this.pooled
      ? storagePool.take(bytes, this.shared, options.zeroed ?? true)
      : this.shared
        ? new SharedArrayBuffer(bytes)
        : new ArrayBuffer(bytes);
    this.memory = typedArrayFor(this.dtype, buffer, 0, this.numel);
  }
}

function checkNumel(numel: number): void {
  if (!Number.isSafeInteger(numel) || numel < 0) {
    throw new TensorError(`Invalid storage size ${numel}.`, {
      code: 'invalid-argument',
      expected: 'a non-negative integer number of elements',
      actual: numel,
      fix: 'pass the element count, not a byte count or a shape.',
    });
  }
}
