import { BFLOAT16_REGIONS, bfloat16Kernels, SIMD_BLOCK } from './bfloat16-simd';
import { PLACEMENT_MINIMUM, placementShift } from './scratch-placement';

/**
 * bfloat16 <-> float32 conversion, round to nearest even. A private copy: this package depends on
 * no other package of the project.
 *
 * [Note: bfloat16 bits] A bfloat16 is the upper 16 bits of a float32. Rounding adds 0x7fff plus
 * the lowest kept bit before truncating, which rounds ties to even; NaN is kept quiet (never
 * rounded up into infinity).
 *
 * The array functions run WebAssembly SIMD kernels block by block (bfloat16-simd.ts) and fall
 * back to the scalar loops below for short arrays and where SIMD is unavailable. Each call moves
 * the kernels' regions off the page offsets of the arrays it copies ([Note: scratch placement]).
 */
const { input: INPUT, output: OUTPUT, encoded: ENCODED } = BFLOAT16_REGIONS;

/** The kernels' shift for a call over `length` elements ([Note: scratch placement]). */
function shiftFor(length: number, regions: readonly number[], arrays: readonly ArrayBufferView[]): number {
  return length < PLACEMENT_MINIMUM ? 0 : placementShift(regions, arrays);
}
const scalarFloat = new Float32Array(1);
const scalarBits = new Uint32Array(scalarFloat.buffer);

/** Below this many elements the scalar loop beats the copies into wasm memory. */
const SIMD_MINIMUM = 64;

/**
 * The bfloat16 bits of one number (rounded to nearest even). Named for what it returns: tensor's
 * `float32ToBfloat16(source, target)` converts whole arrays.
 */
export function roundToBfloat16Bits(value: number): number {
  scalarFloat[0] = value;
  return bfloat16BitsFromFloat32Bits(scalarBits[0]!);
}

/** The number whose float32 upper half is the bfloat16 `bits` (the inverse of roundToBfloat16Bits). */
export function numberFromBfloat16Bits(bits: number): number {
  scalarBits[0] = (bits & 0xffff) << 16;
  return scalarFloat[0]!;
}

/** Rounds the bits of one float32 to a bfloat16 word ([Note: bfloat16 bits]). */
export function bfloat16BitsFromFloat32Bits(bits: number): number {
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x007fffff) !== 0) return (bits >>> 16) | 0x0040;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** Writes bfloat16 bits of `source[i]` into `target[i]` for i < source.length. */
export function encodeBfloat16(source: Float32Array, target: Uint16Array): void {
  const kernels = source.length >= SIMD_MINIMUM ? bfloat16Kernels() : null;
  if (kernels === null) {
    encodeScalar(source, target, 0, source.length);
    return;
  }
  const shift = shiftFor(source.length, [INPUT, OUTPUT], [source, target]);
  const { inputFloats, outputHalves } = kernels.at(shift);
  for (let start = 0; start < source.length; start += SIMD_BLOCK) {
    const count = Math.min(SIMD_BLOCK, source.length - start);
    inputFloats.set(source.subarray(start, start + count));
    kernels.encode(count, shift);
    target.set(outputHalves.subarray(0, count), start);
  }
}

/** Writes the float32 value of each bfloat16 in `source` into `target`. */
export function decodeBfloat16(source: Uint16Array, target: Float32Array): void {
  const kernels = source.length >= SIMD_MINIMUM ? bfloat16Kernels() : null;
  if (kernels === null) {
    decodeScalar(source, target, 0, source.length);
    return;
  }
  const shift = shiftFor(source.length, [INPUT, OUTPUT], [source, target]);
  const { inputHalves, outputFloats } = kernels.at(shift);
  for (let start = 0; start < source.length; start += SIMD_BLOCK) {
    const count = Math.min(SIMD_BLOCK, source.length - start);
    inputHalves.set(source.subarray(start, start + count));
    kernels.decode(count, shift);
    target.set(outputFloats.subarray(0, count), start);
  }
}

/** target[i] += float32 value of the bfloat16 `source[i]`: the fused decode-add of a reduction. */
export function addBfloat16Into(target: Float32Array, source: Uint16Array): void {
  const kernels = source.length >= SIMD_MINIMUM ? bfloat16Kernels() : null;
  if (kernels === null) {
    const bits = new Int32Array(1);
    const value = new Float32Array(bits.buffer);
    for (let index = 0; index < source.length; index++) {
      bits[0] = source[index]! << 16;
      target[index] = target[index]! + value[0]!;
    }
    return;
  }
  const shift = shiftFor(source.length, [INPUT, OUTPUT], [source, target]);
  const { inputHalves, outputFloats } = kernels.at(shift);
  for (let start = 0; start < source.length; start += SIMD_BLOCK) {
    const count = Math.min(SIMD_BLOCK, source.length - start);
    const block = target.subarray(start, start + count);
    inputHalves.set(source.subarray(start, start + count));
    outputFloats.set(block);
    kernels.decodeAdd(count, shift);
    block.set(outputFloats.subarray(0, count));
  }
}

/**
 * target[i] = own[i] + the float32 value of the bfloat16 `incoming[i]`, rounded to bfloat16
 * (still float32), and `encoded[i]` = its bfloat16 bits: a sum's last reduce step in one pass.
 * `target` may be `own`.
 */
export function addRoundBfloat16(
  own: Float32Array,
  incoming: Uint16Array,
  target: Float32Array,
  encoded: Uint16Array,
): void {
  const kernels = incoming.length >= SIMD_MINIMUM ? bfloat16Kernels() : null;
  if (kernels === null) {
    const bits = new Int32Array(1);
    const value = new Float32Array(bits.buffer);
    for (let index = 0; index < incoming.length; index++) {
      bits[0] = incoming[index]! << 16;
      target[index] = own[index]! + value[0]!;
    }
    encodeScalar(target, encoded, 0, incoming.length);
    decodeScalar(encoded, target, 0, incoming.length);
    return;
  }
  const shift = shiftFor(incoming.length, [INPUT, OUTPUT, OUTPUT, ENCODED], [incoming, own, target, encoded]);
  const { inputHalves, outputFloats, encodedHalves } = kernels.at(shift);
  for (let start = 0; start < incoming.length; start += SIMD_BLOCK) {
    const count = Math.min(SIMD_BLOCK, incoming.length - start);
    inputHalves.set(incoming.subarray(start, start + count));
    outputFloats.set(own.subarray(start, start + count));
    kernels.addRound(count, shift);
    target.set(outputFloats.subarray(0, count), start);
    encoded.set(encodedHalves.subarray(0, count), start);
  }
}

/**
 * `encoded[i]` = the bfloat16 bits of `source[i]` and `rounded[i]` = their float32 value (the
 * source rounded to bfloat16), in one pass.
 */
export function encodeRoundBfloat16(source: Float32Array, rounded: Float32Array, encoded: Uint16Array): void {
  const kernels = source.length >= SIMD_MINIMUM ? bfloat16Kernels() : null;
  if (kernels === null) {
    encodeScalar(source, encoded, 0, source.length);
    decodeScalar(encoded, rounded, 0, source.length);
    return;
  }
  const shift = shiftFor(source.length, [INPUT, OUTPUT, ENCODED], [source, rounded, encoded]);
  const { inputFloats, outputFloats, encodedHalves } = kernels.at(shift);
  for (let start = 0; start < source.length; start += SIMD_BLOCK) {
    const count = Math.min(SIMD_BLOCK, source.length - start);
    inputFloats.set(source.subarray(start, start + count));
    kernels.encodeRound(count, shift);
    rounded.set(outputFloats.subarray(0, count), start);
    encoded.set(encodedHalves.subarray(0, count), start);
  }
}

/** Rounds every value of `values` to the nearest bfloat16, in place (still float32). */
export function roundToBfloat16InPlace(values: Float32Array): void {
  const kernels = values.length >= SIMD_MINIMUM ? bfloat16Kernels() : null;
  if (kernels === null) {
    roundScalar(values, 0, values.length);
    return;
  }
  const shift = shiftFor(values.length, [INPUT, OUTPUT], [values, values]);
  const { inputFloats, outputFloats } = kernels.at(shift);
  for (let start = 0; start < values.length; start += SIMD_BLOCK) {
    const count = Math.min(SIMD_BLOCK, values.length - start);
    const block = values.subarray(start, start + count);
    inputFloats.set(block);
    kernels.round(count, shift);
    block.set(outputFloats.subarray(0, count));
  }
}

/**
 * [Note: bfloat16 in the float32's own bytes]
 * A bfloat16 all-reduce of a float32 buffer needs no copy of its own: `narrowToBfloat16InPlace`
 * writes the bfloat16 of element i at bytes 2i..2i+1 of the same buffer and returns the
 * Uint16Array over its first half; `widenBfloat16InPlace` turns that half back into float32s.
 * Narrowing runs forward: the bytes element i's word lands on belong to element ⌊i/2⌋ ≤ i, which
 * was read already. Widening runs backward: element i's float lands on words 2i and 2i+1, which
 * are ≥ i and were widened already (word 0 is read before element 0 is written). Each SIMD block
 * is read whole into the kernels' memory before any of it is written, so the block order is all
 * that matters; the scalar loops keep the same order element by element.
 */
export function narrowToBfloat16InPlace(values: Float32Array): Uint16Array {
  const words = new Uint16Array(values.buffer, values.byteOffset, values.length);
  encodeBfloat16(values, words);
  return words;
}

/** The inverse of narrowToBfloat16InPlace: `values`' first half holds bfloat16 words, widened over the whole. */
export function widenBfloat16InPlace(values: Float32Array): void {
  const words = new Uint16Array(values.buffer, values.byteOffset, values.length);
  const kernels = values.length >= SIMD_MINIMUM ? bfloat16Kernels() : null;
  if (kernels === null) {
    const bits = new Int32Array(values.buffer, values.byteOffset, values.length);
    for (let index = values.length - 1; index >= 0; index--) bits[index] = words[index]! << 16;
    return;
  }
  const shift = shiftFor(values.length, [INPUT, OUTPUT], [words, values]);
  const { inputHalves, outputFloats } = kernels.at(shift);
  const lastStart = Math.floor((values.length - 1) / SIMD_BLOCK) * SIMD_BLOCK;
  for (let start = lastStart; start >= 0; start -= SIMD_BLOCK) {
    const count = Math.min(SIMD_BLOCK, values.length - start);
    inputHalves.set(words.subarray(start, start + count));
    kernels.decode(count, shift);
    values.set(outputFloats.subarray(0, count), start);
  }
}

/** The scalar loops (exported for the tests that check the kernels against them). */
export function encodeScalar(source: Float32Array, target: Uint16Array, start: number, end: number): void {
  // Int32 views and `| 0` keep the loop in int32 arithmetic (Uint32 reads above 2^31 are doubles).
  const bits = new Int32Array(source.buffer, source.byteOffset, source.length);
  for (let index = start; index < end; index++) {
    const value = bits[index]!;
    target[index] =
      (value & 0x7f800000) === 0x7f800000 && (value & 0x007fffff) !== 0
        ? (value >>> 16) | 0x0040
        : ((value + 0x7fff + ((value >>> 16) & 1)) | 0) >>> 16;
  }
}

export function decodeScalar(source: Uint16Array, target: Float32Array, start: number, end: number): void {
  const bits = new Int32Array(target.buffer, target.byteOffset, target.length);
  for (let index = start; index < end; index++) bits[index] = source[index]! << 16;
}

export function roundScalar(values: Float32Array, start: number, end: number): void {
  const bits = new Int32Array(values.buffer, values.byteOffset, values.length);
  for (let index = start; index < end; index++) {
    const value = bits[index]!;
    bits[index] =
      (value & 0x7f800000) === 0x7f800000 && (value & 0x007fffff) !== 0
        ? (value | 0x00400000) & 0xffff0000
        : ((value + 0x7fff + ((value >>> 16) & 1)) | 0) & 0xffff0000;
  }
}
