/**
 * A seeded pseudo-random generator that gives the same stream in every process and on every
 * platform (FSDP ranks initialise the same weights from the same seed without communicating).
 *
 * [Note: generator algorithm]
 * xoshiro128** (Blackman and Vigna, 2018): 128 bits of state, period 2^128 - 1, passes BigCrush;
 * pure 32-bit integer arithmetic (Math.imul, >>>), so it is exact in JavaScript. The seed is
 * expanded into the state by splitmix32. Uniforms in [0, 1) use the top 24 bits (exact in float32
 * and float64); normals use the Box-Muller transform and cache the second value.
 */
export class Generator {
  private state = new Uint32Array(4);
  private spareNormal: number | null = null;

  constructor(seed = 0) {
    this.manualSeed(seed);
  }

  /** Restarts the stream from `seed` (any integer; only its low 32 bits matter). */
  manualSeed(seed: number): this {
    let mix = seed >>> 0;
    for (let index = 0; index < 4; index++) {
      mix = (mix + 0x9e3779b9) >>> 0;
      let z = mix;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      this.state[index] = (z ^ (z >>> 16)) >>> 0;
    }
    if (this.state.every((word) => word === 0)) this.state[0] = 1;
    this.spareNormal = null;
    return this;
  }

  /** The next 32 random bits as an unsigned integer. */
  nextUint32(): number {
    const s = this.state;
    const result = Math.imul(rotateLeft(Math.imul(s[1]!, 5), 7), 9) >>> 0;
    const t = (s[1]! << 9) >>> 0;
    s[2]! ^= s[0]!;
    s[3]! ^= s[1]!;
    s[1]! ^= s[2]!;
    s[0]! ^= s[3]!;
    s[2]! ^= t;
    s[3] = rotateLeft(s[3]!, 11);
    return result;
  }

  /**
   * Advances the stream past `count` values of `nextUint32` without computing them (xoshiro's
   * state update alone, on local integers: several times faster than drawing).
   */
  skip(count: number): this {
    const s = this.state;
    let s0 = s[0]! | 0;
    let s1 = s[1]! | 0;
    let s2 = s[2]! | 0;
    let s3 = s[3]! | 0;
    for (let index = 0; index < count; index++) {
      const t = s1 << 9;
      s2 ^= s0;
      s3 ^= s1;
      s1 ^= s2;
      s0 ^= s3;
      s2 ^= t;
      s3 = (s3 << 11) | (s3 >>> 21);
    }
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
    s[3] = s3;
    return this;
  }

  /**
   * Leaves the generator exactly where `count` calls of `normal()` would (state and cached spare),
   * drawing only the last pair when `count` ends half-way through one. Deferred initialisation
   * uses it to reach the first element a rank keeps (see [Note: deferred initialisation]).
   */
  skipNormals(count: number): this {
    let remaining = count;
    if (remaining > 0 && this.spareNormal !== null) {
      this.spareNormal = null;
      remaining--;
    }
    this.skip(2 * Math.floor(remaining / 2));
    if (remaining % 2 === 1) this.normal();
    return this;
  }

  /** Uniform in [0, 1). */
  uniform(): number {
    return (this.nextUint32() >>> 8) / 16777216;
  }

  /** Standard normal (mean 0, standard deviation 1), by Box-Muller. */
  normal(): number {
    if (this.spareNormal !== null) {
      const spare = this.spareNormal;
      this.spareNormal = null;
      return spare;
    }
    const u1 = 1 - this.uniform(); // (0, 1]: log is finite
    const u2 = this.uniform();
    const radius = Math.sqrt(-2 * Math.log(u1));
    this.spareNormal = radius * Math.sin(2 * Math.PI * u2);
    return radius * Math.cos(2 * Math.PI * u2);
  }

  /** A snapshot of the state (restore it with `setState` to replay the same stream). */
  getState(): GeneratorState {
    return { words: [...this.state], spareNormal: this.spareNormal };
  }

  /** Restores a state returned by `getState`. */
  setState(state: GeneratorState): void {
    this.state.set(state.words);
    this.spareNormal = state.spareNormal;
  }
}

/** A Generator's state, to save and restore. */
export interface GeneratorState {
  readonly words: readonly number[];
  readonly spareNormal: number | null;
}

function rotateLeft(value: number, bits: number): number {
  return ((value << bits) | (value >>> (32 - bits))) >>> 0;
}

/** The generator layers use when none is passed. Seeded with 0 at startup, like every process. */
export const defaultGenerator = new Generator(0);

/** Re-seeds the default generator (the `torch.manual_seed` of this package). */
export function manualSeed(seed: number): void {
  defaultGenerator.manualSeed(seed);
}
