/**
 * float32 <-> bfloat16 conversion. bfloat16 is the top 16 bits of a float32; rounding is to
 * nearest, ties to even. NaN stays NaN (made quiet), ±Inf stays ±Inf, and values that round past
 * the largest finite bfloat16 become ±Inf, as IEEE rounding prescribes.
 */

const scratchFloat = new Float32Array(1);
const scratchBits = new Uint32Array(scratchFloat.buffer);

/** Rounds the bits of one float32 to a bfloat16 word. */
export function bfloat16BitsFromFloat32Bits(bits: number): number {
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x007fffff) !== 0) {
    return ((bits >>> 16) | 0x0040) & 0xffff; // NaN: keep sign and payload top, force quiet bit
  }
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** One float32 value as a bfloat16 word (round to nearest even). */
export function float32ToBfloat16Scalar(value: number): number {
  scratchFloat[0] = value;
  return bfloat16BitsFromFloat32Bits(scratchBits[0]!);
}

/** One bfloat16 word as a float32 value. */
export function bfloat16ToFloat32Scalar(word: number): number {
  scratchBits[0] = (word & 0xffff) << 16;
  return scratchFloat[0]!;
}

/**
 * Converts `source` into `target` (same length), in one pass over the 32-bit words.
 * `target` may not alias `source`.
 */
export function float32ToBfloat16(source: Float32Array, target: Uint16Array): Uint16Array {
  const bits = new Uint32Array(source.buffer, source.byteOffset, source.length);
  const length = Math.min(bits.length, target.length);
  for (let index = 0; index < length; index++) {
    const word = bits[index]!;
    if ((word & 0x7f800000) === 0x7f800000 && (word & 0x007fffff) !== 0) {
      target[index] = (word >>> 16) | 0x0040;
    } else {
      target[index] = (word + 0x7fff + ((word >>> 16) & 1)) >>> 16;
    }
  }
  return target;
}

/** Widens bfloat16 words to float32 (exact). */
export function bfloat16ToFloat32(source: Uint16Array, target: Float32Array): Float32Array {
  const bits = new Uint32Array(target.buffer, target.byteOffset, target.length);
  const length = Math.min(bits.length, source.length);
  for (let index = 0; index < length; index++) {
    bits[index] = source[index]! << 16;
  }
  return target;
}
