import {
  finishAverage,
  inPlaceBfloat16Kernels,
  inPlaceKernels,
  reduceBlocks,
  reduceInto,
} from '@fsdp-ts/kernels';
import type { CollectiveBuffer, CollectiveDtype, ReduceOp } from '../../types.js';
import { isArenaBuffer, reserve, type SharedMemory } from './shm-arena.js';
import { kernelName } from './shm-reduce.js';

/** The accumulator's block stays in L2 between its reduction and its copies out. */
export const IN_PLACE_BLOCK = 32_768;

/**
 * Reduces `sources` into every view of `targets` like reduceShared, in place in the arena
 * ([Note: in-place simd]), per block of IN_PLACE_BLOCK elements, every source in rank order,
 * avg dividing once:
 *   - the first target is the first source (all-reduce; an in-place reduce-scatter on rank 0):
 *     every other source is reduced into it, the last one storing into its own view as well
 *     when that is a later target (all-reduce), then the block is copied into the other targets;
 *   - otherwise (reduceChained): the first step stores first (op) second straight into the first
 *     target, with no copy of the first source, and every later step reduces into it; when the
 *     first target is a later source k (an in-place reduce-scatter on rank k > 0: its output is
 *     its own block of its input), the steps before k store into this thread's scratch block and
 *     step k stores into the target, each lane read before it is written.
 * bfloat16 sum and avg: reduceBfloat16InArena. Returns false, having touched nothing, when it
 * cannot: bfloat16 max or min, a view outside the arena, a target that overlaps a source without
 * being it, or no SIMD.
 */
export function reduceInArena(
  sources: readonly CollectiveBuffer[],
  targets: readonly CollectiveBuffer[],
  dtype: CollectiveDtype,
  op: ReduceOp,
  size: number,
  arena: SharedMemory,
): boolean {
  if (sources.length === 0 || targets.length === 0) return false;
  if (dtype === 'bfloat16' && op !== 'sum' && op !== 'avg') return false;
  const views = [...sources, ...targets];
  if (!views.every((view) => isArenaBuffer(arena, view.buffer))) return false;
  // Every source's lanes are read before the first target's are written, in both branches below
  // and in the bfloat16 one, except when the first target is the first source (then it is the
  // accumulator from the start, which is what it must be).
  const chained = dtype === 'bfloat16' || !same(sources[0]!, targets[0]!);
  if (!safeAliasing(sources, targets, chained)) return false;
  const kernels = inPlaceKernels(arena);
  if (kernels === null) return false;
  if (dtype === 'bfloat16')
    return reduceBfloat16InArena(sources as Uint16Array[], targets as Uint16Array[], op, size, arena);
  if (chained) return reduceChained(sources, targets, dtype, op, size, arena);
  const floats = dtype === 'float32';
  const name = kernelName(floats, op);
  const average = floats && op === 'avg';
  // The last source is also a later target (all-reduce): its reduction stores into it as well.
  const last = sources.length - 1;
  const both =
    average || last < 1
      ? -1
      : targets.findIndex((target, index) => index > 0 && same(target, sources[last]!));
  const accumulator = targets[0] as Float32Array | Int32Array;
  const length = accumulator.length;
  const vectorEnd = length - (length % 4);
  for (let start = 0; start < length; start += IN_PLACE_BLOCK) {
    const end = Math.min(length, start + IN_PLACE_BLOCK);
    const block = accumulator.subarray(start, end);
    const vectors = Math.max(0, Math.min(end, vectorEnd) - start);
    const address = accumulator.byteOffset + start * 4;
    for (let index = 1; index < sources.length; index++) {
      const source = sources[index]! as Float32Array | Int32Array;
      const reduce = index === last && both > 0 ? kernels.reduceBoth[name] : kernels.reduce[name];
      if (vectors > 0) reduce(address, source.byteOffset + start * 4, vectors * 4);
      if (start + vectors < end)
        reduceInto(block.subarray(vectors), source.subarray(start + vectors, end) as never, op);
    }
    if (average) {
      if (vectors > 0) kernels.divide(address, vectors * 4, size);
      if (start + vectors < end) finishAverage(block.subarray(vectors) as Float32Array, size);
    }
    for (let index = 1; index < targets.length; index++) {
      if (index === both) targets[index]!.set(block.subarray(vectors) as never, start + vectors);
      else targets[index]!.set(block as never, start);
    }
  }
  return true;
}

/**
 * float32 or int32 whose first target is not the first source (see reduceInArena): per block,
 * step i (i = 1 .. n-1) stores (the result so far, or the first source) (op) source i into the
 * first target, or into the scratch block while i < k when the target is source k; avg divides
 * the target's block; then the block is copied into the other targets. The last 0-3 elements go
 * through the scalar kernels in a small array, in the same order.
 */
function reduceChained(
  sources: readonly CollectiveBuffer[],
  targets: readonly CollectiveBuffer[],
  dtype: 'float32' | 'int32',
  op: ReduceOp,
  size: number,
  arena: SharedMemory,
): boolean {
  const kernels = inPlaceKernels(arena)!;
  const target = targets[0] as Float32Array | Int32Array;
  const later = sources.findIndex((source) => same(source, target));
  const scratch = later > 1 ? scratchBlock(arena, IN_PLACE_BLOCK * 4) : 0;
  if (scratch === null) return false;
  const floats = dtype === 'float32';
  const into = kernels.reduceInto[kernelName(floats, op)];
  const average = floats && op === 'avg';
  const length = target.length;
  const vectorEnd = length - (length % 4);
  for (let start = 0; start < length; start += IN_PLACE_BLOCK) {
    const end = Math.min(length, start + IN_PLACE_BLOCK);
    const vectors = Math.max(0, Math.min(end, vectorEnd) - start);
    const address = target.byteOffset + start * 4;
    if (vectors > 0) {
      let current = sources[0]!.byteOffset + start * 4;
      if (sources.length === 1) target.set(sources[0]!.subarray(start, start + vectors) as never, start);
      for (let index = 1; index < sources.length; index++) {
        const destination = index < later ? scratch : address;
        into(current, sources[index]!.byteOffset + start * 4, vectors * 4, destination);
        current = destination;
      }
      if (average) kernels.divide(address, vectors * 4, size);
    }
    if (start + vectors < end) {
      const tail = (floats ? Float32Array : Int32Array).from(
        sources[0]!.subarray(start + vectors, end) as never,
      );
      for (let index = 1; index < sources.length; index++)
        reduceInto(tail, sources[index]!.subarray(start + vectors, end) as never, op);
      if (average) finishAverage(tail as Float32Array, size);
      target.set(tail as never, start + vectors);
    }
    const block = target.subarray(start, end);
    for (let index = 1; index < targets.length; index++) targets[index]!.set(block as never, start);
  }
  return true;
}

const BFLOAT16_BLOCK = 16_384;
let scratch: { arena: SharedMemory; address: number; bytes: number } | undefined;

function scratchBlock(arena: SharedMemory, bytes: number): number | null {
  if (scratch?.arena !== arena || scratch.bytes < bytes) {
    const address = reserve(arena, bytes);
    if (address === null) return null;
    scratch = { arena, address, bytes };
  }
  return scratch.address;
}

/**
 * bfloat16 sum or avg in the arena ([Note: in-place bfloat16]): per block, every source decoded
 * (then decoded and added) into this thread's float32 scratch block in rank order, divided once
 * for avg, rounded once into the first target and copied into the others; the last 0-7 elements
 * go through reduceBlocks. Every source's block is read before any target's is written.
 */
function reduceBfloat16InArena(
  sources: readonly Uint16Array[],
  targets: readonly Uint16Array[],
  op: ReduceOp,
  size: number,
  arena: SharedMemory,
): boolean {
  const halves = inPlaceBfloat16Kernels(arena);
  const floats = inPlaceKernels(arena);
  if (halves === null || floats === null) return false;
  const block = scratchBlock(arena, BFLOAT16_BLOCK * 4);
  if (block === null) return false;
  const first = targets[0]!;
  const length = sources[0]!.length;
  const vectorEnd = length - (length % 8);
  for (let start = 0; start < vectorEnd; start += BFLOAT16_BLOCK) {
    const count = Math.min(vectorEnd, start + BFLOAT16_BLOCK) - start;
    halves.decode(block, sources[0]!.byteOffset + start * 2, count);
    for (let index = 1; index < sources.length; index++)
      halves.decodeAdd(block, sources[index]!.byteOffset + start * 2, count);
    if (op === 'avg') floats.divide(block, count * 4, size);
    halves.encode(first.byteOffset + start * 2, block, count);
    for (let index = 1; index < targets.length; index++)
      targets[index]!.set(first.subarray(start, start + count), start);
  }
  if (vectorEnd < length)
    reduceBlocks(
      sources.map((source) => source.subarray(vectorEnd)),
      targets.map((target) => target.subarray(vectorEnd)),
      'bfloat16',
      op,
      size,
    );
  return true;
}

/**
 * Whether blockwise in-place reduction reads every source before writing over it: every target
 * overlaps no source or is exactly one (then its block is written after every source's same
 * block was read), and, unless every source's block is read before the first target's is written
 * (`chained`), the accumulator
 * (targets[0]) is no source but sources[0].
 */
function safeAliasing(
  sources: readonly CollectiveBuffer[],
  targets: readonly CollectiveBuffer[],
  chained: boolean,
): boolean {
  const range = (view: CollectiveBuffer) => [view.byteOffset, view.byteOffset + view.byteLength] as const;
  const overlap = (a: CollectiveBuffer, b: CollectiveBuffer) => {
    const [aStart, aEnd] = range(a);
    const [bStart, bEnd] = range(b);
    return aStart < bEnd && bStart < aEnd;
  };
  return targets.every(
    (target, index) =>
      sources.every(
        (source, sourceIndex) =>
          !overlap(target, source) || (same(target, source) && (chained || index > 0 || sourceIndex === 0)),
      ) && targets.every((other) => other === target || !overlap(target, other) || same(target, other)),
  );
}

function same(a: CollectiveBuffer, b: CollectiveBuffer): boolean {
  return a.byteOffset === b.byteOffset && a.byteLength === b.byteLength;
}
