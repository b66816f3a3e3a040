import { reserve } from './internal/shm/shm-arena.js';
import { threadRankContext } from './internal/shm/thread-rank-context.js';
import type { CollectiveBuffer } from './types.js';

/** Options of allocateShared. */
export interface AllocateSharedOptions {
  /**
   * Place the buffer in the shared arena of the thread ranks (spawnThreadRanks), where the shm
   * backend reduces in place without copying through a kernel's own memory ([Note: shm arena]).
   * Arena memory is never freed: use it for buffers that live for the run. Outside a thread rank
   * (or when the arena is full) the buffer is an ordinary SharedArrayBuffer. Default false.
   */
  arena?: boolean;
}

/** Allocates a zero-filled typed array over a SharedArrayBuffer (no staging copy when passed to an op). */
export function allocateShared<T extends CollectiveBuffer>(
  Constructor: {
    new (memory: SharedArrayBuffer): T;
    new (memory: SharedArrayBuffer, byteOffset: number, length: number): T;
    readonly BYTES_PER_ELEMENT: number;
  },
  length: number,
  options: AllocateSharedOptions = {},
): T {
  const bytes = length * Constructor.BYTES_PER_ELEMENT;
  const arena = options.arena === true ? threadRankContext()?.arena : undefined;
  if (arena !== undefined && arena !== null) {
    const offset = reserve(arena, bytes);
    // Fresh arena memory is zero: it was never handed out before.
    if (offset !== null) return new Constructor(arena.buffer, offset, length);
  }
  return new Constructor(new SharedArrayBuffer(bytes));
}
