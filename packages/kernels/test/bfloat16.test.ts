import {
  addBfloat16Into,
  addRoundBfloat16,
  bfloat16Kernels,
  decodeBfloat16,
  decodeScalar,
  encodeBfloat16,
  encodeRoundBfloat16,
  encodeScalar,
  narrowToBfloat16InPlace,
  numberFromBfloat16Bits,
  roundScalar,
  roundToBfloat16Bits,
  roundToBfloat16InPlace,
  widenBfloat16InPlace,
} from '@fsdp-ts/kernels';
import { describe, expect, it } from 'vitest';

/** float32 bit patterns covering every class: zeros, subnormals, ties, infinities, quiet and signalling NaNs. */
function interestingFloats(length: number, seed: number): Float32Array {
  const values = new Float32Array(length);
  const bits = new Uint32Array(values.buffer);
  let state = seed;
  const special = [0, 0x80000000, 1, 0x00008000, 0x00018000, 0x3f808000, 0x3f818000, 0x7f7fffff, 0x7f800000];
  const more = [0xff800000, 0x7f800001, 0x7fc00000, 0xffffffff, 0x7fbfffff, 0x3f807fff, 0xbf80ffff];
  const fixed = [...special, ...more];
  for (let index = 0; index < length; index++) {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    bits[index] = index < fixed.length ? fixed[index]! : state;
  }
  return values;
}

const bitsOf = (values: Float32Array) => Array.from(new Uint32Array(values.slice().buffer));

describe('bfloat16 conversion', () => {
  it('has WebAssembly SIMD kernels on this runtime', () => {
    expect(bfloat16Kernels()).not.toBeNull();
  });

  // Lengths around the SIMD block (16384) and the 8-lane width, at unaligned element offsets.
  for (const [length, offset] of [
    [0, 0],
    [1, 0],
    [63, 1],
    [64, 0],
    [1001, 3],
    [16_384, 0],
    [16_391, 5],
    [40_000, 2],
  ] as const) {
    it(`encode, decode, round and decode-add agree with the scalar loops bit for bit (${length} at +${offset})`, () => {
      const source = interestingFloats(length + offset, length + 7).subarray(offset);
      const encoded = new Uint16Array(length + offset).subarray(offset);
      const expected = new Uint16Array(length);
      encodeBfloat16(source, encoded);
      encodeScalar(source, expected, 0, length);
      expect(Array.from(encoded)).toEqual(Array.from(expected));

      const decoded = new Float32Array(length + offset).subarray(offset);
      const decodedExpected = new Float32Array(length);
      decodeBfloat16(encoded, decoded);
      decodeScalar(encoded, decodedExpected, 0, length);
      expect(bitsOf(decoded)).toEqual(bitsOf(decodedExpected));

      const rounded = source.slice();
      const roundedExpected = source.slice();
      roundToBfloat16InPlace(rounded);
      roundScalar(roundedExpected, 0, length);
      expect(bitsOf(rounded)).toEqual(bitsOf(roundedExpected));

      // Encode and round in one pass: the same bits as each alone.
      const bothRounded = new Float32Array(length);
      const bothEncoded = new Uint16Array(length);
      encodeRoundBfloat16(source, bothRounded, bothEncoded);
      expect(bitsOf(bothRounded)).toEqual(bitsOf(roundedExpected));
      expect(Array.from(bothEncoded)).toEqual(Array.from(expected));

      const accumulator = interestingFloats(length, 99).map((value) => (Number.isFinite(value) ? value : 1));
      const sum = accumulator.slice();
      addBfloat16Into(sum, encoded);
      const sumExpected = accumulator.map((value, index) => Math.fround(value + decodedExpected[index]!));
      expect(bitsOf(sum)).toEqual(bitsOf(sumExpected));

      // The fused last reduce step: the sum rounded, and its bits, as the scalar loops give them.
      const fusedTarget = new Float32Array(length);
      const fusedEncoded = new Uint16Array(length);
      addRoundBfloat16(accumulator, encoded, fusedTarget, fusedEncoded);
      const fusedExpected = sumExpected.slice();
      roundScalar(fusedExpected, 0, length);
      const fusedEncodedExpected = new Uint16Array(length);
      encodeScalar(sumExpected, fusedEncodedExpected, 0, length);
      expect(bitsOf(fusedTarget)).toEqual(bitsOf(fusedExpected));
      expect(Array.from(fusedEncoded)).toEqual(Array.from(fusedEncodedExpected));
    });
  }

  // [Note: bfloat16 in the float32's own bytes]: one block, several blocks with a partial last
  // one, the scalar path, and a buffer that starts inside a larger one.
  for (const [length, offset] of [
    [1, 0],
    [2, 0],
    [63, 1],
    [64, 0],
    [16_384, 0],
    [16_385, 3],
    [50_001, 2],
  ] as const) {
    it(`narrows into and widens out of a float32 buffer's own bytes as the copies do (${length} at +${offset})`, () => {
      const whole = interestingFloats(length + offset + 2, length + 11);
      const values = whole.subarray(offset, offset + length);
      const after = bitsOf(whole.subarray(offset + length));
      const expectedWords = new Uint16Array(length);
      encodeScalar(values.slice(), expectedWords, 0, length);
      const words = narrowToBfloat16InPlace(values);
      expect(words.buffer).toBe(values.buffer);
      expect(words.byteOffset).toBe(values.byteOffset);
      expect(Array.from(words)).toEqual(Array.from(expectedWords));
      // What a reduction writes into the words (here: each word's neighbour) is widened back.
      const reduced = expectedWords.map((_, index) => expectedWords[(index + 1) % length]!);
      words.set(reduced);
      widenBfloat16InPlace(values);
      const expected = new Float32Array(length);
      decodeScalar(reduced, expected, 0, length);
      expect(bitsOf(values)).toEqual(bitsOf(expected));
      // Nothing past the buffer is touched.
      expect(bitsOf(whole.subarray(offset + length))).toEqual(after);
    });
  }

  it('adds every bfloat16 pattern to sums that round up, down, to ties and to NaN exactly as the scalar loops', () => {
    // own + incoming lands on every rounding case: own values with low bits around the tie.
    // (No NaN among them: which NaN payload a sum of two NaNs keeps is the hardware's choice.)
    const owns = [0, 1.0000001, -3.0000002, 1e-40, 65_504.004, 3.4e38, 1.00390625, -0];
    const length = (1 << 16) * owns.length;
    const incoming = new Uint16Array(length).map((_, index) => index >>> 3);
    const own = new Float32Array(length).map((_, index) => owns[index % owns.length]!);
    const target = new Float32Array(length);
    const encoded = new Uint16Array(length);
    addRoundBfloat16(own, incoming, target, encoded);
    const sum = new Float32Array(length);
    decodeScalar(incoming, sum, 0, length);
    for (let index = 0; index < length; index++) sum[index] = own[index]! + sum[index]!;
    const expectedEncoded = new Uint16Array(length);
    encodeScalar(sum, expectedEncoded, 0, length);
    roundScalar(sum, 0, length);
    const targetBits = new Uint32Array(target.buffer);
    const sumBits = new Uint32Array(sum.buffer);
    let firstDifference: string | undefined;
    for (let index = 0; index < length && firstDifference === undefined; index++)
      if (targetBits[index] !== sumBits[index] || encoded[index] !== expectedEncoded[index])
        firstDifference = `own ${own[index]} + 0x${incoming[index]!.toString(16)}: 0x${targetBits[index]!.toString(16)}/0x${encoded[index]!.toString(16)}, scalar 0x${sumBits[index]!.toString(16)}/0x${expectedEncoded[index]!.toString(16)}`;
    expect(firstDifference).toBeUndefined();
  });

  it('decodes every one of the 2^16 bfloat16 patterns exactly and encodes them back unchanged', () => {
    const patterns = new Uint16Array(1 << 16).map((_, index) => index);
    const floats = new Float32Array(patterns.length);
    decodeBfloat16(patterns, floats);
    const words = new Uint32Array(floats.buffer);
    for (let index = 0; index < patterns.length; index++) expect(words[index]).toBe((index << 16) >>> 0);
    const back = new Uint16Array(patterns.length);
    encodeBfloat16(floats, back);
    // Signalling NaNs come back quiet (bit 6 set); everything else round-trips.
    const expected = patterns.map((bits) =>
      (bits & 0x7f80) === 0x7f80 && (bits & 0x7f) !== 0 ? bits | 0x40 : bits,
    );
    expect(Array.from(back)).toEqual(Array.from(expected));
  });

  it('encodes and rounds (apart and in one pass) every upper half with every kind of lower half exactly as the scalar loops', () => {
    // The kernels round on 16-bit halves ([Note: bfloat16 rounding in 16-bit lanes]): every
    // upper half H (sign, exponent, NaN and infinity boundaries, odd and even) with the lower
    // halves around the tie (0x8000), the extremes and zero (the NaN-or-infinity boundary).
    const lowers = [0, 1, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff, 0x1234];
    const words = new Uint32Array((1 << 16) * lowers.length);
    for (let high = 0; high < 1 << 16; high++)
      for (let index = 0; index < lowers.length; index++)
        words[high * lowers.length + index] = ((high << 16) | lowers[index]!) >>> 0;
    const floats = new Float32Array(words.buffer);
    const encoded = new Uint16Array(words.length);
    const expected = new Uint16Array(words.length);
    encodeBfloat16(floats, encoded);
    encodeScalar(floats, expected, 0, words.length);
    const rounded = floats.slice();
    const roundedExpected = floats.slice();
    roundToBfloat16InPlace(rounded);
    roundScalar(roundedExpected, 0, words.length);
    const bothRounded = new Float32Array(words.length);
    const bothEncoded = new Uint16Array(words.length);
    encodeRoundBfloat16(floats, bothRounded, bothEncoded);
    const bothRoundedBits = new Uint32Array(bothRounded.buffer);
    const roundedBits = new Uint32Array(rounded.buffer);
    const roundedExpectedBits = new Uint32Array(roundedExpected.buffer);
    const firstDifference = (index = 0): string | undefined => {
      for (; index < words.length; index++)
        if (
          encoded[index] !== expected[index] ||
          roundedBits[index] !== roundedExpectedBits[index] ||
          bothEncoded[index] !== expected[index] ||
          bothRoundedBits[index] !== roundedExpectedBits[index]
        )
          return `0x${words[index]!.toString(16)}: encoded 0x${encoded[index]!.toString(16)} (scalar 0x${expected[index]!.toString(16)}), rounded 0x${roundedBits[index]!.toString(16)} (scalar 0x${roundedExpectedBits[index]!.toString(16)})`;
      return undefined;
    };
    expect(firstDifference()).toBeUndefined();
  });

  it('converts one number as the array kernels convert each element', () => {
    const values = interestingFloats(4096, 11);
    const encoded = new Uint16Array(values.length);
    encodeBfloat16(values, encoded);
    const decoded = new Float32Array(values.length);
    decodeBfloat16(encoded, decoded);
    for (let index = 0; index < values.length; index++) {
      expect(roundToBfloat16Bits(values[index]!)).toBe(encoded[index]);
      expect(Object.is(numberFromBfloat16Bits(encoded[index]!), decoded[index]!)).toBe(true);
    }
  });
});
