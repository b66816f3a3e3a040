/**
 * [Note: shm arena] The thread ranks of one spawnThreadRanks call share one growable shared
 * WebAssembly.Memory, the arena. `allocateShared(..., { arena: true })` carves buffers out of it;
 * the shm engine's in-place kernels (in-place-simd.ts) import the same memory, so a reduction
 * reads every rank's slice and writes the result where it lives, with no copy into and out of a
 * kernel's private memory (WebAssembly cannot address a SharedArrayBuffer it did not create).
 *
 * Layout: bytes 0..15 hold a random token, bytes 16..19 the bump pointer in 64-byte units
 * (Atomics), bytes 20..27 the reduction counts ([Note: arena reduction counts]), bytes 28..31 the
 * full flag ([Note: arena full]), bytes 32..63 are free; allocations start at 64 and are 64-byte aligned (one cache line). Arena memory is
 * never freed or reused: it is for buffers that live for the run (parameters, gradients, the
 * benchmark's buffers), not for per-step scratch.
 *
 * A view reaching the communication worker is a structured clone: its SharedArrayBuffer is a new
 * object over the same memory, so identity cannot tell an arena view from another. A view is
 * taken for an arena view when its buffer is no longer than the arena (its length read afresh,
 * [Note: stale arena length]) and starts with the arena's token; byte offsets in the view's
 * buffer are then addresses in the arena. Only a buffer copied from the arena's own first 16
 * bytes could pass, and no API hands those out.
 */

/** The part of the WebAssembly API used here (the project's tsconfig has no DOM library). */
export interface SharedMemory {
  readonly buffer: SharedArrayBuffer;
  grow(pages: number): number;
}

interface MemoryApi {
  Memory: new (descriptor: { initial: number; maximum: number; shared: boolean }) => SharedMemory;
}

const PAGE = 65_536;
const TOKEN_WORDS = 4;
const BUMP_WORD = 4;
const IN_PLACE_WORD = 5;
const COPIED_WORD = 6;
const FULL_WORD = 7;
const FIRST_UNIT = 1;
const UNIT = 64;
/** 4 GiB: the most a 32-bit WebAssembly memory can address. */
export const ARENA_MAX_PAGES = 65_536;

/**
 * A new arena (one page: the header), or null where shared WebAssembly memory is unavailable.
 * `maximumPages` is for tests (an arena that cannot grow far); the default is the 32-bit limit.
 */
export function createArena(maximumPages = ARENA_MAX_PAGES): SharedMemory | null {
  const wasm = (globalThis as { WebAssembly?: MemoryApi }).WebAssembly;
  if (wasm === undefined) return null;
  let memory: SharedMemory;
  try {
    memory = new wasm.Memory({ initial: 1, maximum: maximumPages, shared: true });
  } catch {
    return null;
  }
  const header = new Int32Array(memory.buffer, 0, 16);
  const token = new Int32Array(TOKEN_WORDS);
  crypto.getRandomValues(token);
  header.set(token);
  Atomics.store(header, BUMP_WORD, FIRST_UNIT);
  return memory;
}

/**
 * Byte range [offset, offset + bytes) of the arena, reserved for the caller (every thread of the
 * arena may call this at once), or null when the arena cannot grow that far.
 *
 * [Note: arena full] The range is claimed (compare-and-swap on the bump pointer) before the memory
 * grows. If growing fails, the pointer is swapped back when nobody moved it since, so a later,
 * smaller allocation that fits still lands in the arena. If another thread moved it meanwhile, the
 * range cannot be given back: the full flag is set (`arenaFull`), so that the arena having lost
 * space, and later allocations falling back to plain buffers, is visible rather than silent.
 */
export function reserve(memory: SharedMemory, bytes: number): number | null {
  const units = Math.max(1, Math.ceil(bytes / UNIT));
  const header = new Int32Array(memory.buffer, 0, 16);
  const limitUnits = (ARENA_MAX_PAGES * PAGE) / UNIT;
  for (;;) {
    const first = Atomics.load(header, BUMP_WORD);
    if (first + units > limitUnits) return null;
    if (Atomics.compareExchange(header, BUMP_WORD, first, first + units) !== first) continue;
    const end = (first + units) * UNIT;
    // Concurrent growers may each grow: the memory only ends up larger than needed.
    while (arenaBytes(memory, end) < end) {
      try {
        memory.grow(Math.ceil((end - memory.buffer.byteLength) / PAGE));
      } catch {
        if (arenaBytes(memory, end) >= end) continue;
        if (Atomics.compareExchange(header, BUMP_WORD, first + units, first) !== first + units)
          Atomics.store(header, FULL_WORD, 1);
        return null;
      }
    }
    return first * UNIT;
  }
}

/** Whether a reservation's range was lost to a failed grow ([Note: arena full]). */
export function arenaFull(memory: SharedMemory): boolean {
  return Atomics.load(new Int32Array(memory.buffer, 0, 16), FULL_WORD) === 1;
}

/**
 * [Note: stale arena length] When one thread grows the arena, V8 updates the other threads'
 * `memory.buffer` later, on an interrupt each thread handles when it gets to it: until then a
 * thread's `memory.buffer` is the old, shorter SharedArrayBuffer, though the memory itself (and
 * every view another thread made over the grown buffer) is already longer. Reading the length
 * off `memory.buffer` alone would take a peer's view over the grown arena for a foreign buffer
 * (and the shm engine would reduce it through the copy path, depending on timing), and reserve
 * would grow memory that is already there. `memory.grow(0)` refreshes this thread's buffer at
 * once, so a length that looks too short is read again through it before it counts.
 */
function arenaBytes(memory: SharedMemory, needed: number): number {
  if (memory.buffer.byteLength >= needed) return memory.buffer.byteLength;
  memory.grow(0);
  return memory.buffer.byteLength;
}

/** Whether `buffer` is (a clone of) the arena's memory, see [Note: shm arena]. */
export function isArenaBuffer(memory: SharedMemory, buffer: ArrayBufferLike): boolean {
  if (!(buffer instanceof SharedArrayBuffer) || buffer.byteLength < PAGE) return false;
  // [Note: stale arena length]
  if (buffer.byteLength > arenaBytes(memory, buffer.byteLength)) return false;
  const theirs = new Int32Array(buffer, 0, TOKEN_WORDS);
  const ours = new Int32Array(memory.buffer, 0, TOKEN_WORDS);
  for (let word = 0; word < TOKEN_WORDS; word++) if (theirs[word] !== ours[word]) return false;
  return true;
}

/**
 * [Note: arena reduction counts] Every reduction the shm engine runs with an arena (ops too large
 * for the mailbox; the inline path never passes the arena) adds one, per rank, to the arena's
 * count of reductions done in place or of those that fell back to the copy path (a buffer outside
 * the arena, bfloat16 max or min, overlapping views, no SIMD). Both are sums over every rank and
 * group of one spawnThreadRanks call. They are an internal diagnostic, not API: the tests read
 * them (reductionCounts) to prove which path an op took, since both give the same results.
 */
export type ReductionPath = 'in place' | 'copied';

/** Adds one reduction on `path` to the arena's counts. */
export function countReduction(memory: SharedMemory, path: ReductionPath): void {
  const header = new Int32Array(memory.buffer, 0, 16);
  Atomics.add(header, path === 'in place' ? IN_PLACE_WORD : COPIED_WORD, 1);
}

/** The arena's reduction counts so far ([Note: arena reduction counts]). */
export function reductionCounts(memory: SharedMemory): { inPlace: number; copied: number } {
  const header = new Int32Array(memory.buffer, 0, 16);
  return { inPlace: Atomics.load(header, IN_PLACE_WORD), copied: Atomics.load(header, COPIED_WORD) };
}
