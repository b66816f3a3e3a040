/**
 * float32 <-> IEEE float16 conversion: round to nearest, ties to even, with subnormals; overflow
 * becomes ±Inf; NaN stays NaN; ±Inf stays ±Inf.
 */

const scratchFloat = new Float32Array(1);
const scratchBits = new Uint32Array(scratchFloat.buffer);

/** Rounds the bits of one float32 to a float16 word. */
export function float16BitsFromFloat32Bits(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  let mantissa = bits & 0x7fffff;
  if (exponent === 0xff) {
    return sign | 0x7c00 | (mantissa === 0 ? 0 : 0x0200 | (mantissa >>> 13));
  }
  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    if (halfExponent < -10) return sign; // below half the smallest subnormal: rounds to zero
    mantissa |= 0x800000;
    const shift = 14 - halfExponent;
    let half = mantissa >>> shift;
    const remainder = mantissa & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (remainder > halfway || (remainder === halfway && (half & 1) === 1)) half += 1;
    return sign | half;
  }
  let half = (halfExponent << 10) | (mantissa >>> 13);
  const remainder = mantissa & 0x1fff;
  if (remainder > 0x1000 || (remainder === 0x1000 && (half & 1) === 1)) half += 1; // may carry into Inf
  return sign | half;
}

let widenTable: Float32Array | null = null;

/** float16 word -> float32 value for all 65536 words, built once on first use (256 KiB). */
function table(): Float32Array {
  if (widenTable !== null) return widenTable;
  const values = new Float32Array(65536);
  for (let word = 0; word < 65536; word++) {
    const sign = word & 0x8000 ? -1 : 1;
    const exponent = (word >>> 10) & 0x1f;
    const mantissa = word & 0x3ff;
    if (exponent === 0) values[word] = sign * mantissa * 2 ** -24;
    else if (exponent === 0x1f) values[word] = mantissa === 0 ? sign * Number.POSITIVE_INFINITY : Number.NaN;
    else values[word] = sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
  }
  widenTable = values;
  return values;
}

/** One float32 value as a float16 word (rounded). */
export function float32ToFloat16Scalar(value: number): number {
  scratchFloat[0] = value;
  return float16BitsFromFloat32Bits(scratchBits[0]!);
}

/** One float16 word as a float32 value. */
export function float16ToFloat32Scalar(word: number): number {
  return table()[word & 0xffff]!;
}

/** Converts float32 values to float16 words into `target` and returns it. */
export function float32ToFloat16(source: Float32Array, target: Uint16Array): Uint16Array {
  const bits = new Uint32Array(source.buffer, source.byteOffset, source.length);
  const length = Math.min(bits.length, target.length);
  for (let index = 0; index < length; index++) target[index] = float16BitsFromFloat32Bits(bits[index]!);
  return target;
}

/** Converts float16 words to float32 values into `target` and returns it. */
export function float16ToFloat32(source: Uint16Array, target: Float32Array): Float32Array {
  const values = table();
  const length = Math.min(target.length, source.length);
  for (let index = 0; index < length; index++) target[index] = values[source[index]!]!;
  return target;
}
