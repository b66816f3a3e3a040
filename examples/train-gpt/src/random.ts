/** A small deterministic generator (mulberry32): the same samples in every process for a given seed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = state;
    mixed = Math.imul(mixed ^ (mixed >>> 15), mixed | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4294967296;
  };
}

/** One seed per (step, rank, purpose): streams never overlap between ranks or steps. */
export function streamSeed(...parts: number[]): number {
  let hash = 2166136261;
  for (const part of parts) {
    hash = Math.imul(hash ^ (part >>> 0), 16777619) >>> 0;
    hash = Math.imul(hash ^ (hash >>> 13), 0x5bd1e995) >>> 0;
  }
  return hash;
}
