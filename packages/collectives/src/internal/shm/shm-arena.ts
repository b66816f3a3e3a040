/**
 * [Note: shm arena] The thread ranks of one spawnThreadRanks call share one growable shared
 * WebAssembly.Memory, the arena: `allocateShared(..., { arena: true })` carves buffers out of it,
 * and the in-place kernels import the same memory, so a reduction reads every rank's slice and
 * writes the result where it lives, with no copy through a kernel's private memory.
 * Layout: bytes 0..15 a random token, 16..19 the bump pointer in 64-byte units, 20..27 the
 * reduction counts ([Note: arena reduction counts]), 28..31 the full flag ([Note: arena full]);
 * allocations start at 64, 64-byte aligned, and are never freed (buffers that live for the run).
 * A view that reaches the worker is a structured clone (a new buffer object), so it counts as an
 * arena view when its buffer is no longer than the arena (read afresh, [Note: stale arena
 * length]) and starts with the token; its byte offsets are then arena addresses.
 */

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

export function arenaFull(memory: SharedMemory): boolean {
  return Atomics.load(new Int32Array(memory.buffer, 0, 16), FULL_WORD) === 1;
}

/**
 * [Note: stale arena length] After another thread grew the arena, this thread's `memory.buffer`
 * stays the old, shorter one until V8 handles an interrupt, though the memory is longer already.
 * `memory.grow(0)` refreshes it at once, so a length that looks too short is read again through it
 * (else a peer's view over the grown arena would take the copy path, depending on timing).
 */
function arenaBytes(memory: SharedMemory, needed: number): number {
  if (memory.buffer.byteLength >= needed) return memory.buffer.byteLength;
  memory.grow(0);
  return memory.buffer.byteLength;
}

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
 * [Note: arena reduction counts] Every shm reduction with an arena (ops too large for the mailbox)
 * adds one to the count of reductions done in place, or of those that fell back to the copy path,
 * summed over the ranks and groups of one spawnThreadRanks call; tests read them (reductionCounts).
 */
export type ReductionPath = 'in place' | 'copied';

export function countReduction(memory: SharedMemory, path: ReductionPath): void {
  const header = new Int32Array(memory.buffer, 0, 16);
  Atomics.add(header, path === 'in place' ? IN_PLACE_WORD : COPIED_WORD, 1);
}

export function reductionCounts(memory: SharedMemory): { inPlace: number; copied: number } {
  const header = new Int32Array(memory.buffer, 0, 16);
  return { inPlace: Atomics.load(header, IN_PLACE_WORD), copied: Atomics.load(header, COPIED_WORD) };
}
