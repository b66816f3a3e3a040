import {
  bfloat16ToFloat32,
  bfloat16ToFloat32Scalar,
  float16ToFloat32,
  float16ToFloat32Scalar,
  float32ToBfloat16,
  float32ToBfloat16Scalar,
  float32ToFloat16,
  float32ToFloat16Scalar,
} from '@fsdp-ts/tensor';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

/** Independent reference: the float16 value of a word, from the IEEE formula. */
function float16Reference(word: number): number {
  const sign = word & 0x8000 ? -1 : 1;
  const exponent = (word >> 10) & 0x1f;
  const fraction = word & 0x3ff;
  if (exponent === 0x1f) return fraction ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

const finiteHalfWords = Array.from({ length: 0x7c00 }, (_, word) => word); // +0 .. largest finite

/** Nearest float16 word to a non-negative value, ties to the even word (reference by search). */
function nearestHalfWord(value: number): number {
  if (value >= 65520) return 0x7c00; // rounds to Inf: 65504 + half an ulp (16)
  let low = 0;
  let high = finiteHalfWords.length - 1;
  while (high - low > 1) {
    const middle = (low + high) >> 1;
    if (float16Reference(middle) <= value) low = middle;
    else high = middle;
  }
  const below = value - float16Reference(low);
  const above = float16Reference(high) - value;
  if (below < above) return low;
  if (above < below) return high;
  return low % 2 === 0 ? low : high;
}

/** Reference bfloat16 rounding in float64: the nearer of the two truncation neighbours, ties even. */
function bfloat16Reference(value: number): number {
  const bits = new Uint32Array(new Float32Array([value]).buffer)[0]!;
  const lowWord = bits >>> 16;
  const lower = new Float32Array(new Uint32Array([lowWord << 16]).buffer)[0]!;
  const upperWord = (lowWord + 1) & 0xffff;
  // Rounding treats the word after the largest finite one as 2^128 (so overflow goes to Inf).
  const upper =
    (upperWord & 0x7fff) === 0x7f80
      ? Math.sign(value) * 2 ** 128
      : new Float32Array(new Uint32Array([upperWord << 16]).buffer)[0]!;
  const below = Math.abs(value - lower);
  const above = Math.abs(upper - value);
  if (below < above) return lowWord;
  if (above < below) return (lowWord + 1) & 0xffff;
  return lowWord % 2 === 0 ? lowWord : (lowWord + 1) & 0xffff;
}

const finiteFloat32 = fc.float({ noNaN: true, noDefaultInfinity: true });

describe('bfloat16', () => {
  it('rounds to nearest, ties to even, matching a float64 reference', () => {
    fc.assert(
      fc.property(finiteFloat32, (value) => {
        expect(float32ToBfloat16Scalar(value)).toBe(bfloat16Reference(value));
      }),
      { numRuns: 5000 },
    );
  });

  it('round-trips within half a bfloat16 ulp (relative 2^-8) for normal values', () => {
    fc.assert(
      fc.property(fc.float({ min: Math.fround(1e-30), max: Math.fround(1e30), noNaN: true }), (value) => {
        const back = bfloat16ToFloat32Scalar(float32ToBfloat16Scalar(value));
        expect(Math.abs(back - value)).toBeLessThanOrEqual(Math.abs(value) * 2 ** -8);
      }),
    );
  });

  it('keeps NaN and ±Inf, and the vector path equals the scalar path', () => {
    const source = new Float32Array([
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      0,
      -0,
      1,
      3.4e38,
      -1.5,
    ]);
    const words = float32ToBfloat16(source, new Uint16Array(source.length));
    const back = bfloat16ToFloat32(words, new Float32Array(source.length));
    expect(Number.isNaN(back[0])).toBe(true);
    expect(back[1]).toBe(Number.POSITIVE_INFINITY);
    expect(back[2]).toBe(Number.NEGATIVE_INFINITY);
    expect(Object.is(back[4], -0)).toBe(true);
    expect(back[6]).toBe(Number.POSITIVE_INFINITY); // 3.4e38 rounds past the largest finite bfloat16
    expect(back[7]).toBe(-1.5);
    source.forEach((value, index) => {
      if (!Number.isNaN(value)) expect(words[index]).toBe(float32ToBfloat16Scalar(value));
    });
  });
});

describe('float16', () => {
  it('decodes every word like the IEEE formula', () => {
    const words = Uint16Array.from({ length: 65536 }, (_, word) => word);
    const values = float16ToFloat32(words, new Float32Array(65536));
    for (let word = 0; word < 65536; word++) {
      const expected = float16Reference(word);
      if (Number.isNaN(expected)) expect(Number.isNaN(values[word])).toBe(true);
      else expect(values[word]).toBe(Math.fround(expected));
    }
  });

  it('rounds to the nearest float16, ties to even, including subnormals and overflow', () => {
    fc.assert(
      fc.property(fc.float({ min: 0, max: Math.fround(70000), noNaN: true }), (value) => {
        expect(float32ToFloat16Scalar(value)).toBe(nearestHalfWord(value));
        expect(float32ToFloat16Scalar(-value)).toBe(nearestHalfWord(value) | 0x8000);
      }),
      { numRuns: 5000 },
    );
  });

  it('keeps NaN and ±Inf and the vector path equals the scalar path', () => {
    const source = new Float32Array([
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      1e-8,
      65504,
      1e6,
    ]);
    const words = float32ToFloat16(source, new Uint16Array(source.length));
    expect(Number.isNaN(float16ToFloat32Scalar(words[0]!))).toBe(true);
    expect(float16ToFloat32Scalar(words[1]!)).toBe(Number.POSITIVE_INFINITY);
    expect(float16ToFloat32Scalar(words[2]!)).toBe(Number.NEGATIVE_INFINITY);
    expect(float16ToFloat32Scalar(words[3]!)).toBe(0); // below half the smallest subnormal
    expect(float16ToFloat32Scalar(words[4]!)).toBe(65504);
    expect(float16ToFloat32Scalar(words[5]!)).toBe(Number.POSITIVE_INFINITY);
  });
});
