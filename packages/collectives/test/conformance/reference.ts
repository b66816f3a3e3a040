import type { CollectiveDtype } from '../../src/index.js';
import type { ConformanceCase } from './cases.js';

/**
 * Inputs and expected results of the conformance suite, computed with plain loops and an
 * independent bfloat16 rounding (DataView), not with the package's code.
 *
 * [Note: exact inputs] Inputs are small integers (|v| <= 11, int32 larger), exact in bfloat16
 * and float32, so sums are exact in any order and results must match bit for bit; `avg` is
 * fround(sum / size), rounded to bfloat16 for bfloat16 data.
 */
export function inputValue(testCase: ConformanceCase, rank: number, index: number): number {
  const base = (index * 31 + rank * 17 + testCase.seed * 7) % 23;
  if (testCase.dtype === 'int32') return (base - 11) * 97_003 + rank;
  return base - 11;
}

const view = new DataView(new ArrayBuffer(4));
const roundingCache = new Map<number, number>();

export function roundBfloat16(value: number): number {
  const cached = roundingCache.get(value);
  if (cached !== undefined) return cached;
  const rounded = roundBfloat16Uncached(value);
  if (roundingCache.size < 100_000) roundingCache.set(value, rounded);
  return rounded;
}

function roundBfloat16Uncached(value: number): number {
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

/** Length of rank `rank`'s result buffer and the value expected at each index, by plain loops. */
export function expectedResult(
  testCase: ConformanceCase,
  rank: number,
  size: number,
): { length: number; at: (index: number) => number } {
  const count = testCase.count;
  switch (testCase.kind) {
    case 'allReduce':
      return { length: count, at: (i) => reduce(testCase, size, i) };
    case 'reduceScatter':
      return { length: count, at: (i) => reduce(testCase, size, rank * count + i) };
    case 'allGather':
      return {
        length: count * size,
        at: (i) => finish(inputValue(testCase, Math.floor(i / count), i % count), testCase),
      };
    case 'broadcast':
      return { length: count, at: (i) => finish(inputValue(testCase, testCase.root, i), testCase) };
    case 'sendRecv':
      // Rank 0 sends to every other rank, then receives from ranks 1 .. size-1 in order into the same buffer.
      return { length: count, at: (i) => inputValue(testCase, rank === 0 ? size - 1 : 0, i) };
    default:
      return { length: 0, at: () => 0 };
  }
}

/** Fills rank `rank`'s input for a case (bfloat16 as bits). */
export function fillInput(
  testCase: ConformanceCase,
  rank: number,
  into: Float32Array | Int32Array | Uint16Array,
): void {
  const bfloat16 = testCase.dtype === 'bfloat16';
  for (let i = 0; i < into.length; i++) {
    const value = inputValue(testCase, rank, i);
    into[i] = bfloat16 ? toBfloat16Bits(value) : value;
  }
}

/** The number an element of a result buffer stands for (bfloat16 bits decoded). */
export function decodeElement(dtype: CollectiveDtype, raw: number): number {
  if (dtype !== 'bfloat16') return raw;
  view.setUint32(0, (raw << 16) >>> 0);
  return view.getFloat32(0);
}
