import type { CollectiveBuffer, CollectiveDtype, ReduceOp } from '../../types.js';
import { reduceBlocks } from '../block-reduce.js';
import { REDUCE_BLOCK, type ReduceKernelName, reduceKernels } from './reduce-simd.js';

/**
 * Reduces `sources` (equal-length views into the ranks' buffers, in rank order) and writes the
 * result into every view of `targets`, like reduceBlocks, with the WebAssembly SIMD kernels for
 * float32 and int32: per block of REDUCE_BLOCK elements, the first source is copied into the
 * kernel's accumulator, every other source into its input and reduced, and the result copied
 * into every target. Each element of each buffer is read or written once, with memcpy
 * (TypedArray.set); the arithmetic stays in L2. bfloat16, and threads without SIMD, go through
 * reduceBlocks.
 */
export function reduceShared(
  sources: readonly CollectiveBuffer[],
  targets: readonly CollectiveBuffer[],
  dtype: CollectiveDtype,
  op: ReduceOp,
  size: number,
): void {
  const kernels = dtype === 'bfloat16' ? null : reduceKernels();
  const first = sources[0];
  if (kernels === null || first === undefined) {
    reduceBlocks(sources, targets, dtype, op, size);
    return;
  }
  const floats = dtype === 'float32';
  const accumulator = floats ? kernels.accumulatorFloats : kernels.accumulatorInts;
  const input = floats ? kernels.inputFloats : kernels.inputInts;
  const reduce = kernels.reduce[kernelName(floats, op)];
  const average = floats && op === 'avg';
  const length = first.length;
  for (let start = 0; start < length; start += REDUCE_BLOCK) {
    const end = Math.min(length, start + REDUCE_BLOCK);
    const count = end - start;
    accumulator.set(first.subarray(start, end) as never);
    for (let index = 1; index < sources.length; index++) {
      input.set(sources[index]!.subarray(start, end) as never);
      reduce(count);
    }
    if (average) kernels.divide(count, size);
    const result = accumulator.subarray(0, count);
    for (const target of targets) target.set(result as never, start);
  }
}

function kernelName(floats: boolean, op: ReduceOp): ReduceKernelName {
  const reduction = op === 'max' ? 'max' : op === 'min' ? 'min' : 'sum';
  return `${reduction}${floats ? 'Float' : 'Int'}`;
}
