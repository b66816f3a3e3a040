import type { ReduceOp } from '../types.js';

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
