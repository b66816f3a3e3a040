import { zeroFill } from './zero-fill';

/**
 * [Note: storage pool]
 * Memory a process has never touched costs a page fault per 4 KiB when it is first written: a
 * fresh 3 MiB SharedArrayBuffer took 2–3 ms to fill here against 0.28 ms for a reused one. FSDP
 * frees a unit's gathered parameters and gradients after every use and allocates them again for
 * the next unit, the same sizes over and over; without reuse a communication-bound step paid that
 * first touch on ~40 MiB. A pool keeps freed buffers by (kind, byte size) and hands them to the
 * next allocation of that size, zero-filled again, as PyTorch's caching allocator does.
 *
 * Bounds: a buffer is allocated fresh only when none of its size waits, so the buffers of one
 * size that are live or pooled never outnumber the most of that size ever live at once: the pool
 * never raises the peak of a size, it only keeps one size's memory while another's is live. At
 * most `maxBuffersPerSize` (8) wait per size (freed memory beyond that is dropped for the garbage
 * collector); `clear()` drops them all. With 2 per size, a communication-bound FSDP step still
 * allocated half its buffers fresh (several units free theirs at the end of backward before the
 * next forward takes any).
 *
 * A pooled buffer is handed out again after `free()`: whoever still holds a typed array over the
 * freed memory (a tensor aliasing it on the cpu backend) sees the next owner's values. Only
 * storages that are freed when nothing else refers to their memory should be pooled (FSDP's
 * gathered parameters are released from their tensors before the unit reshards).
 */
export class StoragePool {
  readonly #free = new Map<string, ArrayBufferLike[]>();
  #pooledBytes = 0;
  #reused = 0;
  #fresh = 0;

  /** @param maxBuffersPerSize freed buffers kept per (kind, byte size); 0 keeps none. */
  constructor(public maxBuffersPerSize = 8) {}

  /**
   * A buffer of `bytes` bytes (SharedArrayBuffer when `shared`), zero-filled; with `zeroed` false
   * a reused buffer keeps its last owner's bytes (the caller overwrites or zeroes them all before
   * any read).
   */
  take(bytes: number, shared: boolean, zeroed = true): ArrayBufferLike {
    const list = this.#free.get(key(bytes, shared));
    const buffer = list?.pop();
    if (buffer === undefined) {
      this.#fresh += 1;
      return shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes);
    }
    this.#reused += 1;
    this.#pooledBytes -= bytes;
    if (zeroed) zeroFill(new Uint8Array(buffer)); // see [Note: zeroing shared memory]
    return buffer;
  }

  /** Returns a buffer nothing refers to any more; kept if its size has room, else dropped. */
  give(buffer: ArrayBufferLike): void {
    const shared = typeof SharedArrayBuffer !== 'undefined' && buffer instanceof SharedArrayBuffer;
    const name = key(buffer.byteLength, shared);
    let list = this.#free.get(name);
    if (list === undefined) {
      list = [];
      this.#free.set(name, list);
    }
    if (list.length >= this.maxBuffersPerSize) return;
    list.push(buffer);
    this.#pooledBytes += buffer.byteLength;
  }

  /** Drops every pooled buffer. */
  clear(): void {
    this.#free.clear();
    this.#pooledBytes = 0;
  }

  /** Bytes waiting in the pool now (not counted as any storage's). */
  get pooledBytes(): number {
    return this.#pooledBytes;
  }

  /** Allocations served from the pool and fresh ones, since construction. */
  get statistics(): { reused: number; fresh: number } {
    return { reused: this.#reused, fresh: this.#fresh };
  }
}

function key(bytes: number, shared: boolean): string {
  return `${shared ? 's' : 'p'}${bytes}`;
}

/** The pool storages allocated with `{ pooled: true }` use. */
export const storagePool = new StoragePool();
