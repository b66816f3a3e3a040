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
 * `sources` (equal-length views, rank order) reduced into every view of `targets`, like
 * reduceBlocks, per REDUCE_BLOCK through the SIMD kernels' memory: each element read or written
 * once, the arithmetic in L2. bfloat16 sum/avg in the bfloat16 kernels (reduceBfloat16); bfloat16
 * max/min and no SIMD through reduceBlocks; all in the arena in place (reduceInArena, counted:
 * [Note: arena reduction counts]). Regions move off the views' page offsets ([Note: scratch placement]).
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
 * bfloat16 sum or avg exactly as reduceBlocks computes it, inside the kernels' memory. The reduce
 * kernels' regions (avg's division) stay put: 64-byte multiples from the bfloat16 ones.
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

/** The SIMD kernel of `op` over floats or ints (avg sums, then divides). */
export function kernelName(floats: boolean, op: ReduceOp): ReduceKernelName {
  const reduction = op === 'max' ? 'max' : op === 'min' ? 'min' : 'sum';
  return `${reduction}${floats ? 'Float' : 'Int'}`;
}
