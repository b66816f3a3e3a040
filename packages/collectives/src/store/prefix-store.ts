import type { Store, StoreWaitOptions } from './store.js';

/**
 * A view of a Store whose keys all get `prefix` (torch's PrefixStore): separates restarts
 * (fsdp-run's `attempt-N/`) and sub-groups sharing one server. `close()` closes the inner store.
 */
export class PrefixStore implements Store {
  constructor(
    readonly prefix: string,
    private readonly inner: Store,
  ) {}

  /** Sets `key` (under this store's prefix) to `value`. */
  set(key: string, value: Uint8Array | string): Promise<void> {
    return this.inner.set(this.prefix + key, value);
  }
  get(key: string, options?: StoreWaitOptions): Promise<Uint8Array> {
    return this.inner.get(this.prefix + key, options);
  }
  add(key: string, delta: number): Promise<number> {
    return this.inner.add(this.prefix + key, delta);
  }
  compareSet(key: string, expected: Uint8Array | string, desired: Uint8Array | string): Promise<Uint8Array> {
    return this.inner.compareSet(this.prefix + key, expected, desired);
  }
  wait(keys: readonly string[], options?: StoreWaitOptions): Promise<void> {
    return this.inner.wait(
      keys.map((key) => this.prefix + key),
      options,
    );
  }
  delete(key: string): Promise<boolean> {
    return this.inner.delete(this.prefix + key);
  }
  /** Closes the underlying store. */
  close(): Promise<void> {
    return this.inner.close();
  }
}
