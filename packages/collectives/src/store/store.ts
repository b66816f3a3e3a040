/**
 * The rendezvous key-value store (the contract of torch.distributed's Store). Values are bytes;
 * strings are stored as UTF-8. Every waiting call takes a timeout and fails with a
 * CollectiveError (code 'timeout') naming the keys it waited for.
 */
export interface StoreWaitOptions {
  /** Milliseconds; defaults to the store's own timeout. */
  timeoutMs?: number;
}

/** A key-value store the ranks rendezvous through (PyTorch's `c10d::Store`). */
export interface Store {
  /** Sets `key` to `value`. */
  set(key: string, value: Uint8Array | string): Promise<void>;
  /** Waits until the key exists, then returns its value. */
  get(key: string, options?: StoreWaitOptions): Promise<Uint8Array>;
  /** Adds `delta` to the integer stored at key (0 when absent) and returns the new value. */
  add(key: string, delta: number): Promise<number>;
  /**
   * Sets key to `desired` if its current value equals `expected` (an empty `expected` matches an
   * absent key); returns the value now stored.
   */
  compareSet(key: string, expected: Uint8Array | string, desired: Uint8Array | string): Promise<Uint8Array>;
  /** Waits until every key exists. */
  wait(keys: readonly string[], options?: StoreWaitOptions): Promise<void>;
  /** Returns whether the key existed. */
  delete(key: string): Promise<boolean>;
  /** Closes the store (a client: its connection). */
  close(): Promise<void>;
}
