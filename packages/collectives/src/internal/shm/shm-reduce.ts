import {
  BFLOAT16_REGIONS,
  type Bfloat16Kernels,
  bfloat16Kernels,
  PLACEMENT_MINIMUM,
  placementShift,
  REDUCE_BLOCK,
  REDUCE_REGIONS,
  type ReduceKernelName,
  type ReduceKernels,
  reduceBlocks,
  reduceKernels,
  SIMD_BLOCK,
} from '@fsdp-ts/kernels';
import type { CollectiveBuffer, CollectiveDtype, ReduceOp } from '../../types.js';
import { reduceInArena } from './in-place-reduce.js';
import { countReduction, type SharedMemory } from './shm-arena.js';

/**
 * Reduces `sources` (equal-length views into the ranks' buffers, in rank order) and writes the
 * result into every view of `targets`, like reduceBlocks, with the WebAssembly SIMD kernels for
 * float32 and int32: per block of REDUCE_BLOCK elements, the first source is copied into the
 * kernel's accumulator, every other source into its input and reduced, and the result copied
 * into every target. Each element of each buffer is read or written once, with memcpy
 * (TypedArray.set); the arithmetic stays in L2. bfloat16 sums and averages decode, add and
 * encode inside the bfloat16 kernels' memory (reduceBfloat16); bfloat16 max and min, and threads
 * without SIMD, go through reduceBlocks. When every view lives in the thread ranks' arena
 * (`arena`, [Note: shm arena]), float32, int32 and bfloat16 sum and avg reduce in place there
 * instead (reduceInArena); with an arena, the path taken is counted ([Note: arena reduction counts]).
 * The kernels' regions are moved off the views' page offsets per call ([Note: scratch placement]).
 */
export function reduceShared(
  sources: readonly CollectiveBuffer[],
  targets: readonly CollectiveBuffer[],
  dtype: CollectiveDtype,
  op: ReduceOp,
  size: number,
  arena: SharedMemory | null = null,
): void {
  if (arena !== null) {
    const inPlace = reduceInArena(sources, targets, dtype, op, size, arena);
    countReduction(arena, inPlace ? 'in place' : 'copied');
    if (inPlace) return;
  }
  const kernels = reduceKernels();
  const first = sources[0];
  if (dtype === 'bfloat16' && (op === 'sum' || op === 'avg')) {
    const conversions = bfloat16Kernels();
    if (kernels !== null && conversions !== null && first !== undefined) {
      reduceBfloat16(sources as Uint16Array[], targets as Uint16Array[], op, size, conversions, kernels);
      return;
    }
  }
  if (kernels === null || first === undefined || dtype === 'bfloat16') {
    reduceBlocks(sources, targets, dtype, op, size);
    return;
  }
  const floats = dtype === 'float32';
  const length = first.length;
  const { accumulator: ACCUMULATOR, input: INPUT } = REDUCE_REGIONS;
  const shift =
    length < PLACEMENT_MINIMUM
      ? 0
      : placementShift(
          [ACCUMULATOR, ...sources.slice(1).map(() => INPUT), ...targets.map(() => ACCUMULATOR)],
          [first, ...sources.slice(1), ...targets],
        );
  const views = kernels.at(shift);
  const accumulator = floats ? views.accumulatorFloats : views.accumulatorInts;
  const input = floats ? views.inputFloats : views.inputInts;
  const reduce = kernels.reduce[kernelName(floats, op)];
  const average = floats && op === 'avg';
  for (let start = 0; start < length; start += REDUCE_BLOCK) {
    const end = Math.min(length, start + REDUCE_BLOCK);
    const count = end - start;
    accumulator.set(first.subarray(start, end) as never);
    for (let index = 1; index < sources.length; index++) {
      input.set(sources[index]!.subarray(start, end) as never);
      reduce(count, shift);
    }
    if (average) kernels.divide(count, size, shift);
    const result = accumulator.subarray(0, count);
    for (const target of targets) target.set(result as never, start);
  }
}

/**
 * bfloat16 sum or avg, exactly as reduceBlocks computes it (decode the first source, add the
 * others decoded in float32 in rank order, divide once for avg, round once), without leaving
 * the kernels' memory between the steps: per block, each source is copied in once and the
 * result copied out once per target. The bfloat16 regions move off the views' page offsets; the
 * reduce kernels' (used for avg's division only, between the two modules' memories) stay put:
 * their distance to the bfloat16 regions is a multiple of 64 bytes, never 4 to 28.
 */
function reduceBfloat16(
  sources: readonly Uint16Array[],
  targets: readonly Uint16Array[],
  op: 'sum' | 'avg',
  size: number,
  conversions: Bfloat16Kernels,
  kernels: ReduceKernels,
): void {
  const length = sources[0]!.length;
  const shift =
    length < PLACEMENT_MINIMUM
      ? 0
      : placementShift(
          [...sources.map(() => BFLOAT16_REGIONS.input), ...targets.map(() => BFLOAT16_REGIONS.output)],
          [...sources, ...targets],
        );
  const { inputHalves, inputFloats, outputFloats, outputHalves } = conversions.at(shift);
  for (let start = 0; start < length; start += SIMD_BLOCK) {
    const end = Math.min(length, start + SIMD_BLOCK);
    const count = end - start;
    inputHalves.set(sources[0]!.subarray(start, end));
    conversions.decode(count, shift);
    for (let index = 1; index < sources.length; index++) {
      inputHalves.set(sources[index]!.subarray(start, end));
      conversions.decodeAdd(count, shift);
    }
    const sum = outputFloats.subarray(0, count);
    if (op === 'avg') {
      kernels.accumulatorFloats.set(sum);
      kernels.divide(count, size);
      inputFloats.set(kernels.accumulatorFloats.subarray(0, count));
    } else inputFloats.set(sum);
    conversions.encode(count, shift);
    const result = outputHalves.subarray(0, count);
    for (const target of targets) target.set(result, start);
  }
}

function kernelName(floats: boolean, op: ReduceOp): ReduceKernelName {
  const reduction = op === 'max' ? 'max' : op === 'min' ? 'min' : 'sum';
  return `${reduction}${floats ? 'Float' : 'Int'}`;
}
