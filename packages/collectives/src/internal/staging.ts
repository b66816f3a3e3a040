import type { CollectiveBuffer } from '../types.js';

/** A buffer as the worker sees it, and how to bring results back to the caller's buffer. */
export interface Staged {
  shared: CollectiveBuffer;
  /** Copies the worker's result back into a caller buffer that is not SharedArrayBuffer-backed. */
  copyBack: (() => void) | undefined;
}

/**
 * [Note: staging] The worker reads and writes the caller's memory directly when the buffer is a
 * view over a SharedArrayBuffer. Any other buffer is copied once into fresh shared memory when
 * the op is issued and, for outputs, copied back when `wait()` or `await` sees the op succeed;
 * until then the caller's buffer keeps its old contents.
 */
export function stage(buffer: CollectiveBuffer, isOutput: boolean): Staged {
  if (buffer.buffer instanceof SharedArrayBuffer) return { shared: buffer, copyBack: undefined };
  const Constructor = buffer.constructor as new (memory: SharedArrayBuffer) => CollectiveBuffer;
  const shared = new Constructor(new SharedArrayBuffer(buffer.byteLength));
  shared.set(buffer as never);
  return { shared, copyBack: isOutput ? () => buffer.set(shared as never) : undefined };
}
