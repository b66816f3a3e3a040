/**
 * How many ops exchanged their headers on the native path, and how many of those found a
 * mismatch, per process (every tcp group of it): a SharedArrayBuffer the main thread posts to
 * each tcp communication worker. An internal diagnostic, not API: the tests read it
 * (nativeHeaderCounts) to prove which path ran.
 */
let counts: Int32Array | undefined;

export function nativeHeaderCountBuffer(): Int32Array {
  counts ??= new Int32Array(new SharedArrayBuffer(8));
  return counts;
}

export function countNativeHeaders(buffer: Int32Array | undefined, mismatched: boolean): void {
  if (buffer === undefined) return;
  Atomics.add(buffer, 0, 1);
  if (mismatched) Atomics.add(buffer, 1, 1);
}

/** Ops whose headers moved natively, and mismatches found among them, in this process. */
export function nativeHeaderCounts(): { exchanges: number; mismatches: number } {
  const buffer = nativeHeaderCountBuffer();
  return { exchanges: Atomics.load(buffer, 0), mismatches: Atomics.load(buffer, 1) };
}
