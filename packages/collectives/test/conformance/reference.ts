import type { CollectiveDtype } from '../../src/index.js';
import type { ConformanceCase } from './cases.js';

/**
 * [Note: inputs repeat every 23 elements] `inputValue` takes its index mod 23, so every input
 * and every expected result (a plain function of the inputs at one index) repeats with period
 * 23 along a block. The reference computes one period with the plain loops of this file and copies it
 * along the block: the same values as computing every element, at memcpy's speed (the suite's
 * 16 Mi-element cases spent most of each rank's CPU in per-element reference calls).
 */
const PERIOD = 23;

/**
 * Inputs and expected results of the conformance suite, computed with plain loops and an
 * independent bfloat16 rounding (DataView), not with the package's code.
 *
 * [Note: exact inputs] Inputs are small integers (|v| <= 11, int32 larger), exact in bfloat16
 * and float32, so sums are exact in any order and results must match bit for bit; `avg` is
 * fround(sum / size), rounded to bfloat16 for bfloat16 data.
 */
export function inputValue(testCase: ConformanceCase, rank: number, index: number): number {
  // [Note: inputs repeat every 23 elements]: the index enters only modulo PERIOD.
  const base = (index * 31 + rank * 17 + testCase.seed * 7) % PERIOD;
  if (testCase.dtype === 'int32') return (base - 11) * 97_003 + rank;
  return base - 11;
}

const view = new DataView(new ArrayBuffer(4));
export function roundBfloat16(value: number): number {
  view.setFloat32(0, value);
  const bits = view.getUint32(0);
  const lower = bits & 0xffff;
  let upper = bits >>> 16;
  if (lower > 0x8000 || (lower === 0x8000 && (upper & 1) === 1)) upper += 1;
  view.setUint32(0, (upper << 16) >>> 0);
  return view.getFloat32(0);
}

export function toBfloat16Bits(value: number): number {
  view.setFloat32(0, roundBfloat16(value));
  return view.getUint32(0) >>> 16;
}

/** Reduces rank 0 .. size-1's value at `index` with a plain loop. */
function reduce(testCase: ConformanceCase, size: number, index: number): number {
  let result = inputValue(testCase, 0, index);
  for (let r = 1; r < size; r++) {
    const value = inputValue(testCase, r, index);
    if (testCase.reduceOp === 'max') result = Math.max(result, value);
    else if (testCase.reduceOp === 'min') result = Math.min(result, value);
    else result += value;
  }
  if (testCase.reduceOp === 'avg') result = Math.fround(result / size);
  return finish(result, testCase);
}

function finish(value: number, testCase: ConformanceCase): number {
  if (testCase.dtype === 'int32') return value | 0;
  if (testCase.dtype === 'bfloat16' || testCase.wireDtype === 'bfloat16') return roundBfloat16(value);
  return Math.fround(value);
}

type ElementArray = Float32Array | Int32Array | Uint16Array;

/** Writes `valueAt(j)` into `into[start + j]` for j < length, computing one period and copying it. */
function fillPeriodic(
  into: ElementArray,
  start: number,
  length: number,
  valueAt: (j: number) => number,
): void {
  const first = Math.min(PERIOD, length);
  for (let j = 0; j < first; j++) into[start + j] = valueAt(j);
  // `filled` stays a multiple of PERIOD until the last copy, so each copy continues the period.
  for (let filled = first; filled < length; ) {
    const chunk = Math.min(filled, length - filled);
    into.copyWithin(start + filled, start, start + chunk);
    filled += chunk;
  }
}

function resultArray(dtype: CollectiveDtype, length: number): ElementArray {
  if (dtype === 'float32') return new Float32Array(length);
  if (dtype === 'int32') return new Int32Array(length);
  return new Uint16Array(length);
}

/** The stored form of a value in a buffer of `dtype` (bfloat16 as bits; typed-array stores round float32 and int32). */
function encodeElement(dtype: CollectiveDtype, value: number): number {
  return dtype === 'bfloat16' ? toBfloat16Bits(value) : value;
}

/**
 * Rank `rank`'s expected result buffer for a case, element by element in the result's own
 * storage (bfloat16 as bits), so a result matches when its bytes equal these.
 */
export function expectedResult(testCase: ConformanceCase, rank: number, size: number): ElementArray {
  const { count, dtype } = testCase;
  const periodic = (length: number, valueAt: (j: number) => number): ElementArray => {
    const expected = resultArray(dtype, length);
    fillPeriodic(expected, 0, length, (j) => encodeElement(dtype, valueAt(j)));
    return expected;
  };
  switch (testCase.kind) {
    case 'allReduce':
      return periodic(count, (j) => reduce(testCase, size, j));
    case 'reduceScatter':
      return periodic(count, (j) => reduce(testCase, size, rank * count + j));
    case 'allGather': {
      const expected = resultArray(dtype, count * size);
      for (let block = 0; block < size; block++)
        fillPeriodic(expected, block * count, count, (j) =>
          encodeElement(dtype, finish(inputValue(testCase, block, j), testCase)),
        );
      return expected;
    }
    case 'broadcast':
      return periodic(count, (j) => finish(inputValue(testCase, testCase.root, j), testCase));
    case 'sendRecv':
      // Rank 0 sends to every other rank, then receives from ranks 1 .. size-1 in order into the same buffer.
      return periodic(count, (j) => inputValue(testCase, rank === 0 ? size - 1 : 0, j));
    default:
      return resultArray(dtype, 0);
  }
}

/** Fills rank `rank`'s input for a case (bfloat16 as bits). */
export function fillInput(testCase: ConformanceCase, rank: number, into: ElementArray): void {
  fillPeriodic(into, 0, into.length, (j) => encodeElement(testCase.dtype, inputValue(testCase, rank, j)));
}

/** The number an element of a result buffer stands for (bfloat16 bits decoded). */
export function decodeElement(dtype: CollectiveDtype, raw: number): number {
  if (dtype !== 'bfloat16') return raw;
  view.setUint32(0, (raw << 16) >>> 0);
  return view.getFloat32(0);
}

function bytesOf(array: ArrayBufferView): Buffer {
  return Buffer.from(array.buffer, array.byteOffset, array.byteLength);
}

/** undefined when two buffers hold the same bytes (compared natively); else the first byte that differs. */
export function firstDifferingByte(a: ArrayBufferView, b: ArrayBufferView): number | undefined {
  const [left, right] = [bytesOf(a), bytesOf(b)];
  if (left.equals(right)) return undefined;
  const differs = left.findIndex((value, index) => value !== right[index]);
  return differs === -1 ? Math.min(left.length, right.length) : differs;
}

/**
 * undefined when `actual` holds exactly `expected`'s elements (compared as bytes: an element
 * matches only with the same bits, so -0 is not 0); else the first element that differs.
 */
export function firstDifference(
  dtype: CollectiveDtype,
  actual: ElementArray,
  expected: ElementArray,
): string | undefined {
  if (actual.length !== expected.length) return `length ${actual.length}, expected ${expected.length}`;
  const byte = firstDifferingByte(actual, expected);
  if (byte === undefined) return undefined;
  const index = Math.floor(byte / actual.BYTES_PER_ELEMENT);
  return `element ${index}: got ${decodeElement(dtype, actual[index]!)}, expected ${decodeElement(dtype, expected[index]!)}`;
}
