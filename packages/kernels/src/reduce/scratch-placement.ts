/**
 * [Note: scratch placement] The SIMD kernels (bfloat16-simd.ts, shm/reduce-simd.ts) work in
 * fixed regions of their own WebAssembly memory and copy the caller's arrays in and out block by
 * block with TypedArray.set (glibc memmove). On this project's machines (AMD EPYC, glibc 2.36,
 * Node 20; architecture/performance.md, "4 KiB aliasing of scratch regions") a copy runs
 * 2.5-6x slower when its destination's address is 4 to 28 bytes past its source's modulo 4 KiB
 * (4K aliasing: the loads wait on the stores before them whose low 12 address bits match). Block
 * loops keep an array's offset within a page from block to block, so an array at the wrong
 * offset pays on every block, for as long as it lives.
 *
 * So every region has PLACEMENT_ROOM bytes of room after its base, and a call over arrays of at
 * least PLACEMENT_MINIMUM elements moves all its regions by one shift (a multiple of
 * PLACEMENT_STEP) when one of them is within PLACEMENT_MARGIN bytes of the page offset of the array
 * it is copied to or from: the shift that puts them farthest from those page offsets. The page offset of an array is taken as its byteOffset modulo 4 KiB: exact
 * for views over WebAssembly memory (the shm arena), 16 bytes off for buffers of 128 KiB and more
 * that malloc maps fresh (they start 16 bytes into a page), and unknown for buffers malloc carves
 * from its heap (smaller ones, and large ones once it has freed a large one): those land at any
 * 16-byte offset, so about one array-region pair in 256 is still hit, as before this placement.
 * With at most seven pairs per call, the chosen shift keeps every region at least 256 bytes from
 * its array's page offset taken this way (each pair rules out 512 of the 4096 offsets).
 * The arithmetic does not depend on where the regions are: results are bit-identical at every shift.
 */

/** Bytes of room after each region's base: shifts are below this. */
export const PLACEMENT_ROOM = 4096;
/** Shifts are multiples of this many bytes (keeps 16-byte vector alignment). */
export const PLACEMENT_STEP = 64;
/** Below this many elements a call keeps shift 0 (choosing costs more than a hit could). */
export const PLACEMENT_MINIMUM = 4096;
/** Shift 0 is kept while every region is at least this far from its array's page offset. */
export const PLACEMENT_MARGIN = 256;

const PAGE = 4096;

/** Distance between two offsets within a 4 KiB page, going round the page (0..2048). */
export function pageDistance(a: number, b: number): number {
  const apart = Math.abs((a % PAGE) - (b % PAGE));
  return Math.min(apart, PAGE - apart);
}

/**
 * The shift for regions at byte offsets `regions[i]` (of a page-aligned WebAssembly memory),
 * each copied to or from `arrays[i]`: 0 while every pair is PLACEMENT_MARGIN apart (the regions
 * then stay where other calls keep them warm), else the candidate farthest, over all pairs, from
 * the arrays' page offsets (the smallest such shift on ties).
 */
export function placementShift(regions: readonly number[], arrays: readonly ArrayBufferView[]): number {
  let best = 0;
  let bestDistance = -1;
  for (let shift = 0; shift < PLACEMENT_ROOM; shift += PLACEMENT_STEP) {
    let distance = PAGE;
    for (let index = 0; index < regions.length; index++)
      distance = Math.min(distance, pageDistance(regions[index]! + shift, arrays[index]!.byteOffset));
    if (shift === 0 && distance >= PLACEMENT_MARGIN) return 0;
    if (distance > bestDistance) {
      best = shift;
      bestDistance = distance;
    }
  }
  return best;
}
