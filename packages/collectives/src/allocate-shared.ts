import type { CollectiveBuffer } from './types.js';

/** Allocates a zero-filled typed array over a SharedArrayBuffer (no staging copy when passed to an op). */
export function allocateShared<T extends CollectiveBuffer>(
  Constructor: { new (memory: SharedArrayBuffer): T; readonly BYTES_PER_ELEMENT: number },
  length: number,
): T {
  return new Constructor(new SharedArrayBuffer(length * Constructor.BYTES_PER_ELEMENT));
}
