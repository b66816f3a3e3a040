import { Storage, StoragePool, storagePool, TensorView } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';

describe('storage pool (see [Note: storage pool])', () => {
  it('a pooled storage re-allocates into memory another pooled storage freed, zero-filled', () => {
    storagePool.clear();
    const first = Storage.allocate('float32', 1000, { shared: true, pooled: true });
    new TensorView(first, 0, [1000]).fill(7);
    const memory = first.buffer();
    first.free();
    expect(storagePool.pooledBytes).toBe(memory.byteLength);
    const second = Storage.allocate('float32', 1000, { shared: true, pooled: true });
    expect(second.buffer()).toBe(memory);
    expect(new TensorView(second, 0, [1000]).toArray()).toEqual(new Array(1000).fill(0));
    expect(storagePool.pooledBytes).toBe(0);
    // A different byte size (after rounding to 64) or kind never gets it.
    second.free();
    const other = Storage.allocate('float32', 900, { shared: true, pooled: true });
    const plain = Storage.allocate('float32', 1000, { pooled: true });
    expect(other.buffer()).not.toBe(memory);
    expect(plain.buffer()).not.toBe(memory);
    expect(plain.buffer() instanceof SharedArrayBuffer).toBe(false);
    storagePool.clear();
  });

  it('unpooled storages never touch the pool', () => {
    storagePool.clear();
    const storage = Storage.allocate('float32', 64, { shared: true });
    storage.free();
    expect(storagePool.pooledBytes).toBe(0);
  });

  it('keeps at most maxBuffersPerSize buffers of one size and counts reuse', () => {
    const pool = new StoragePool(2);
    const buffers = [0, 1, 2].map(() => pool.take(256, true));
    for (const buffer of buffers) pool.give(buffer);
    expect(pool.pooledBytes).toBe(512);
    expect(pool.take(256, true)).toBe(buffers[1]);
    expect(pool.take(256, true)).toBe(buffers[0]);
    expect(pool.take(256, true)).not.toBe(buffers[2]);
    expect(pool.statistics).toEqual({ reused: 2, fresh: 4 });
    pool.clear();
    expect(pool.pooledBytes).toBe(0);
  });
});

describe('allocate({ zeroed: false })', () => {
  it('hands out a pooled buffer without zeroing it; a fresh one is zero and a default allocate zeroes', () => {
    storagePool.clear();
    const first = Storage.allocate('float32', 1000, { shared: true, pooled: true });
    new TensorView(first, 0, [1000]).fill(7);
    first.free();
    const reused = Storage.unallocated('float32', 1000, { shared: true, pooled: true });
    reused.allocate({ zeroed: false });
    expect(new TensorView(reused, 0, [1000]).toArray()).toEqual(new Array(1000).fill(7));
    const fresh = Storage.unallocated('float32', 1000, { shared: true, pooled: true });
    fresh.allocate({ zeroed: false });
    expect(new TensorView(fresh, 0, [1000]).toArray()).toEqual(new Array(1000).fill(0));
    reused.free();
    fresh.allocate();
    const zeroed = Storage.unallocated('float32', 1000, { shared: true, pooled: true });
    zeroed.allocate();
    expect(new TensorView(zeroed, 0, [1000]).toArray()).toEqual(new Array(1000).fill(0));
    storagePool.clear();
  });
});
