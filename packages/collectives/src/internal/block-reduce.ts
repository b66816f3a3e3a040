import type { CollectiveBuffer, CollectiveDtype, ReduceOp } from '../types.js';
import { decodeBfloat16, encodeBfloat16 } from './bfloat16.js';
import { finishAverage, reduceInto, reducePair } from './reduce-kernels.js';

const BLOCK = 16_384;
const accumulatorFloat = new Float32Array(BLOCK);
const scratchFloat = new Float32Array(BLOCK);
const accumulatorInt = new Int32Array(BLOCK);
const encoded = new Uint16Array(BLOCK);
const scratchBits = new Int32Array(scratchFloat.buffer);
const oneFloat = new Float32Array(1);
const oneBits = new Int32Array(oneFloat.buffer);

/**
 * Reduces `sources` (equal-length views, in rank order, so every rank that reduces the same
 * elements gets the same bits) and writes the result into every view of `targets`. Works in
 * cache-sized blocks; bfloat16 is accumulated in float32 and rounded once.
 */
export function reduceBlocks(
  sources: readonly CollectiveBuffer[],
  targets: readonly CollectiveBuffer[],
  dtype: CollectiveDtype,
  op: ReduceOp,
  size: number,
): void {
  const first = sources[0];
  if (first === undefined) return;
  if (
    dtype === 'float32' &&
    sources.length === 2 &&
    targets.length === 2 &&
    targets[0] === first &&
    targets[1] === sources[1]
  ) {
    reducePairInPlace(first as Float32Array, sources[1] as Float32Array, op, size);
    return;
  }
  if (
    dtype === 'bfloat16' &&
    (op === 'sum' || op === 'avg') &&
    sources.length === 2 &&
    targets.length === 2 &&
    targets[0] === first &&
    targets[1] === sources[1]
  ) {
    reduceBfloat16PairInPlace(first as Uint16Array, sources[1] as Uint16Array, op === 'avg' ? size : 1);
    return;
  }
  const length = first.length;
  for (let start = 0; start < length; start += BLOCK) {
    const end = Math.min(length, start + BLOCK);
    const blockLength = end - start;
    if (dtype === 'int32') {
      const accumulator = accumulatorInt.subarray(0, blockLength);
      const firstBlock = (first as Int32Array).subarray(start, end);
      if (sources.length === 1) accumulator.set(firstBlock);
      else reducePair(accumulator, firstBlock, (sources[1] as Int32Array).subarray(start, end), op);
      for (let j = 2; j < sources.length; j++)
        reduceInto(accumulator, (sources[j] as Int32Array).subarray(start, end), op);
      for (const target of targets) (target as Int32Array).set(accumulator, start);
    } else if (dtype === 'float32') {
      const accumulator = accumulatorFloat.subarray(0, blockLength);
      const firstBlock = (first as Float32Array).subarray(start, end);
      if (sources.length === 1) accumulator.set(firstBlock);
      else reducePair(accumulator, firstBlock, (sources[1] as Float32Array).subarray(start, end), op);
      for (let j = 2; j < sources.length; j++)
        reduceInto(accumulator, (sources[j] as Float32Array).subarray(start, end), op);
      if (op === 'avg') finishAverage(accumulator, size);
      for (const target of targets) (target as Float32Array).set(accumulator, start);
    } else {
      const accumulator = accumulatorFloat.subarray(0, blockLength);
      const scratch = scratchFloat.subarray(0, blockLength);
      decodeBfloat16((first as Uint16Array).subarray(start, end), accumulator);
      for (let j = 1; j < sources.length; j++) {
        const source = (sources[j] as Uint16Array).subarray(start, end);
        if (op === 'sum' || op === 'avg') addBfloat16(source, blockLength);
        else {
          decodeBfloat16(source, scratch);
          reduceInto(accumulator, scratch, op);
        }
      }
      if (op === 'avg') finishAverage(accumulator, size);
      const bits = encoded.subarray(0, blockLength);
      encodeBfloat16(accumulator, bits);
      for (const target of targets) (target as Uint16Array).set(bits, start);
    }
  }
}

/**
 * The common two-rank float32 all-reduce in one pass: a[i] = b[i] = a[i] (op) b[i], with no
 * accumulator and no copies (2 reads and 2 writes per element instead of 6 memory passes).
 */
function reducePairInPlace(a: Float32Array, b: Float32Array, op: ReduceOp, size: number): void {
  const length = a.length;
  if (op === 'sum' || op === 'avg') {
    const average = op === 'avg';
    for (let i = 0; i < length; i++) {
      const sum = a[i]! + b[i]!;
      const value = average ? Math.fround(sum) / size : sum;
      a[i] = value;
      b[i] = value;
    }
    return;
  }
  for (let i = 0; i < length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    const value = op === 'max' ? (x >= y || Number.isNaN(x) ? x : y) : x <= y || Number.isNaN(x) ? x : y;
    a[i] = value;
    b[i] = value;
  }
}

/**
 * accumulator[i] += bfloat16 source[i] in one pass: each element is decoded through the scratch
 * block's bits (same index, so it stays in cache) and added at once.
 */
function addBfloat16(source: Uint16Array, length: number): void {
  for (let i = 0; i < length; i++) {
    scratchBits[i] = source[i]! << 16;
    accumulatorFloat[i] = accumulatorFloat[i]! + scratchFloat[i]!;
  }
}

/**
 * The two-rank bfloat16 sum/average all-reduce in one pass: decode both, add in float32, divide,
 * round to nearest-even once (see [Note: bfloat16 bits]) and write the result into both.
 */
function reduceBfloat16PairInPlace(a: Uint16Array, b: Uint16Array, divisor: number): void {
  const length = a.length;
  for (let i = 0; i < length; i++) {
    oneBits[0] = a[i]! << 16;
    const x = oneFloat[0]!;
    oneBits[0] = b[i]! << 16;
    oneFloat[0] = x + oneFloat[0]!;
    if (divisor !== 1) oneFloat[0] = oneFloat[0]! / divisor;
    const bits = oneBits[0]!;
    const rounded =
      (bits & 0x7f800000) === 0x7f800000 && (bits & 0x007fffff) !== 0
        ? (bits >>> 16) | 0x0040
        : ((bits + 0x7fff + ((bits >>> 16) & 1)) | 0) >>> 16;
    a[i] = rounded;
    b[i] = rounded;
  }
}
