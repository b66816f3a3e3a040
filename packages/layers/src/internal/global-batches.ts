/**
 * [Note: global batches]
 * Every rank walks the same sequence of global batches (the same sample order, agreed through a
 * seed rank 0 broadcasts, and the batch size the user asked for). Of a global batch of n samples,
 * rank r takes samples [floor(n·r/W), floor(n·(r+1)/W)): contiguous, disjoint, covering the batch.
 */
export interface BatchRange {
  start: number;
  end: number;
}

export function batchRanges(sampleCount: number, batchSize: number): BatchRange[] {
  const ranges: BatchRange[] = [];
  for (let start = 0; start < sampleCount; start += batchSize) {
    ranges.push({ start, end: Math.min(start + batchSize, sampleCount) });
  }
  return ranges;
}

/** This rank's part of a global batch of `count` samples, relative to the batch start. */
export function localRange(count: number, rank: number, size: number): BatchRange {
  return { start: Math.floor((count * rank) / size), end: Math.floor((count * (rank + 1)) / size) };
}

/** A seeded 32-bit generator (mulberry32): the same sequence in every process for the same seed. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}

/** Sample order of one epoch: identity, or a Fisher–Yates shuffle seeded by (seed, epoch). */
export function epochOrder(sampleCount: number, shuffle: boolean, seed: number, epoch: number): Int32Array {
  const order = new Int32Array(sampleCount);
  for (let index = 0; index < sampleCount; index++) order[index] = index;
  if (!shuffle) return order;
  const next = generator(Math.imul(seed ^ 0x9e3779b9, epoch + 1));
  for (let index = sampleCount - 1; index > 0; index--) {
    const other = Math.floor(next() * (index + 1));
    const value = order[index]!;
    order[index] = order[other]!;
    order[other] = value;
  }
  return order;
}
