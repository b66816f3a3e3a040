/**
 * float32 <-> bfloat16 conversion. bfloat16 is the top 16 bits of a float32; rounding is to
 * nearest, ties to even. NaN stays NaN (made quiet), ±Inf stays ±Inf, and values that round past
 * the largest finite bfloat16 become ±Inf, as IEEE rounding prescribes. The arithmetic is
 * @fsdp-ts/kernels' ([Note: bfloat16 bits]): the scalar rounding, and WebAssembly SIMD kernels for
 * arrays of 64 elements and more, bit for bit the scalar loops.
 */
import {
  decodeBfloat16,
  encodeBfloat16,
  narrowToBfloat16InPlace as narrowInPlace,
  numberFromBfloat16Bits,
  bfloat16BitsFromFloat32Bits as roundBits,
  roundToBfloat16Bits,
  widenBfloat16InPlace as widenInPlace,
} from '@fsdp-ts/kernels';

/** Rounds the bits of one float32 to a bfloat16 word. */
export function bfloat16BitsFromFloat32Bits(bits: number): number {
  return roundBits(bits);
}

/** One float32 value as a bfloat16 word (round to nearest even). */
export function float32ToBfloat16Scalar(value: number): number {
  return roundToBfloat16Bits(value);
}

/** One bfloat16 word as a float32 value. */
export function bfloat16ToFloat32Scalar(word: number): number {
  return numberFromBfloat16Bits(word);
}

/**
 * Converts `source` into `target` (the shorter length of the two), in one pass.
 * `target` may not alias `source`.
 */
export function float32ToBfloat16(source: Float32Array, target: Uint16Array): Uint16Array {
  const length = Math.min(source.length, target.length);
  encodeBfloat16(source.subarray(0, length), target.subarray(0, length));
  return target;
}

/** Widens bfloat16 words to float32 (exact). */
export function bfloat16ToFloat32(source: Uint16Array, target: Float32Array): Float32Array {
  const length = Math.min(source.length, target.length);
  decodeBfloat16(source.subarray(0, length), target.subarray(0, length));
  return target;
}

/**
 * Rounds `values` to bfloat16 inside their own bytes: the returned Uint16Array over the first
 * half of `values`' memory holds the words, and `values` reads as garbage until
 * `widenBfloat16InPlace` turns them back into float32s. A bfloat16 collective on the words then
 * needs no second buffer ([Note: bfloat16 in the float32's own bytes] in @fsdp-ts/kernels).
 */
export function narrowToBfloat16InPlace(values: Float32Array): Uint16Array {
  return narrowInPlace(values);
}

/** Widens the bfloat16 words that `narrowToBfloat16InPlace(values)` left in `values`' first half back over all of it (exact). */
export function widenBfloat16InPlace(values: Float32Array): Float32Array {
  widenInPlace(values);
  return values;
}
