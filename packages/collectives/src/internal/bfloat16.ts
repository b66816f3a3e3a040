/**
 * bfloat16 <-> float32 conversion, round to nearest even. A private copy: this package depends on
 * no other package of the project.
 *
 * [Note: bfloat16 bits] A bfloat16 is the upper 16 bits of a float32. Rounding adds 0x7fff plus
 * the lowest kept bit before truncating, which rounds ties to even; NaN is kept quiet (never
 * rounded up into infinity).
 */
const scalarFloat = new Float32Array(1);
const scalarBits = new Uint32Array(scalarFloat.buffer);

export function float32ToBfloat16(value: number): number {
  scalarFloat[0] = value;
  return roundBits(scalarBits[0]!);
}

export function bfloat16ToFloat32(bits: number): number {
  scalarBits[0] = (bits & 0xffff) << 16;
  return scalarFloat[0]!;
}

function roundBits(bits: number): number {
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x007fffff) !== 0) return (bits >>> 16) | 0x0040;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** Writes bfloat16 bits of `source[i]` into `target[i]` for i < source.length. */
export function encodeBfloat16(source: Float32Array, target: Uint16Array): void {
  // Int32 views and `| 0` keep the loop in int32 arithmetic (Uint32 reads above 2^31 are doubles).
  const bits = new Int32Array(source.buffer, source.byteOffset, source.length);
  const length = source.length;
  for (let index = 0; index < length; index++) {
    const value = bits[index]!;
    target[index] =
      (value & 0x7f800000) === 0x7f800000 && (value & 0x007fffff) !== 0
        ? (value >>> 16) | 0x0040
        : ((value + 0x7fff + ((value >>> 16) & 1)) | 0) >>> 16;
  }
}

/** Writes the float32 value of each bfloat16 in `source` into `target`. */
export function decodeBfloat16(source: Uint16Array, target: Float32Array): void {
  const bits = new Int32Array(target.buffer, target.byteOffset, target.length);
  const length = source.length;
  for (let index = 0; index < length; index++) bits[index] = source[index]! << 16;
}

/** Rounds every value of `values` to the nearest bfloat16, in place (still float32). */
export function roundToBfloat16InPlace(values: Float32Array): void {
  const bits = new Int32Array(values.buffer, values.byteOffset, values.length);
  const length = values.length;
  for (let index = 0; index < length; index++) {
    const value = bits[index]!;
    bits[index] =
      (value & 0x7f800000) === 0x7f800000 && (value & 0x007fffff) !== 0
        ? (value | 0x00400000) & 0xffff0000
        : ((value + 0x7fff + ((value >>> 16) & 1)) | 0) & 0xffff0000;
  }
}
