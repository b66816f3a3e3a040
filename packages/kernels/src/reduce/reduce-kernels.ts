/**
 * The scalar reductions every collective ends in (tcp ring steps, shm reduce, the loopback test
 * backend): element-wise sum, max and min of float32 and int32 arrays, the average's one
 * division, and reduceBlocks, which reduces many views of any collective dtype block by block.
 * The SIMD kernels (reduce-simd.ts, in-place-simd.ts) compute exactly what these compute.
 */
import { addBfloat16Into, decodeBfloat16, encodeBfloat16 } from './bfloat16';
import type { CollectiveBuffer, CollectiveDtype, ReduceOp } from './reduce-types';

/** A float32 or int32 array that reductions accumulate into. */
export type AccumulatorArray = Float32Array | Int32Array;

/**
 * target[i] = target[i] (op) source[i] for i < target.length. For int32 `sum` wraps (two's
 * complement), like NCCL. `avg` accumulates as `sum`; `finishAverage` divides once at the end.
 */
export function reduceInto(target: AccumulatorArray, source: AccumulatorArray, op: ReduceOp): void {
  const length = target.length;
  if (target instanceof Int32Array) {
    if (op === 'sum' || op === 'avg')
      for (let i = 0; i < length; i++) target[i] = (target[i]! + source[i]!) | 0;
    else if (op === 'max') for (let i = 0; i < length; i++) target[i] = Math.max(target[i]!, source[i]!);
    else for (let i = 0; i < length; i++) target[i] = Math.min(target[i]!, source[i]!);
    return;
  }
  if (op === 'sum' || op === 'avg') for (let i = 0; i < length; i++) target[i] = target[i]! + source[i]!;
  else if (op === 'max') {
    for (let i = 0; i < length; i++) {
      const a = target[i]!;
      const b = source[i]!;
      target[i] = a >= b || Number.isNaN(a) ? a : b;
    }
  } else {
    for (let i = 0; i < length; i++) {
      const a = target[i]!;
      const b = source[i]!;
      target[i] = a <= b || Number.isNaN(a) ? a : b;
    }
  }
}

/** target[i] = a[i] (op) b[i]: the first reduction step fused with the copy into the accumulator. */
export function reducePair(
  target: AccumulatorArray,
  a: AccumulatorArray,
  b: AccumulatorArray,
  op: ReduceOp,
): void {
  const length = target.length;
  if (target instanceof Int32Array) {
    if (op === 'sum' || op === 'avg') for (let i = 0; i < length; i++) target[i] = (a[i]! + b[i]!) | 0;
    else if (op === 'max') for (let i = 0; i < length; i++) target[i] = Math.max(a[i]!, b[i]!);
    else for (let i = 0; i < length; i++) target[i] = Math.min(a[i]!, b[i]!);
    return;
  }
  if (op === 'sum' || op === 'avg') for (let i = 0; i < length; i++) target[i] = a[i]! + b[i]!;
  else {
    target.set(a);
    reduceInto(target, b, op);
  }
}

/** Divides a float32 sum by the group size (a division, not a multiplication by 1/size). */
export function finishAverage(values: Float32Array, size: number): void {
  const length = values.length;
  for (let i = 0; i < length; i++) values[i] = values[i]! / size;
}

const BLOCK = 16_384;
const accumulatorFloat = new Float32Array(BLOCK);
const scratchFloat = new Float32Array(BLOCK);
const accumulatorInt = new Int32Array(BLOCK);
const encoded = new Uint16Array(BLOCK);

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
        if (op === 'sum' || op === 'avg') addBfloat16Into(accumulator, source);
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
