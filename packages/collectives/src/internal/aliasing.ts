import { CollectiveError } from '../errors.js';
import type { CollectiveBuffer } from '../types.js';
import { isArenaBuffer, type SharedMemory } from './shm/shm-arena.js';

/**
 * [Note: in-place all-gather and reduce-scatter] As in nccl-tests and PyTorch, an all-gather is
 * in place when its input is this rank's block of its output, a reduce-scatter when its output is
 * this rank's block of its input; every backend computes the same bits for both forms (shm also
 * skips the copy or reduces where the block lives; tcp reduces in the input itself). As with
 * MPI_IN_PLACE, an in-place reduce-scatter may leave partial results in the rest of its input.
 * Any other overlap would make the result
 * depend on timing, so it is refused ('invalid-argument'). Two views share memory when they are
 * over the same buffer object, or both over the thread ranks' arena ([Note: shm arena], whose
 * byte offsets are arena addresses); views over two clones of one SharedArrayBuffer are not
 * detected, and nothing in this package makes them.
 */
export type Aliasing = 'separate' | 'in place' | 'overlap';

export function sameMemory(a: CollectiveBuffer, b: CollectiveBuffer, arena: SharedMemory | null): boolean {
  if (a.buffer === b.buffer) return true;
  return arena !== null && isArenaBuffer(arena, a.buffer) && isArenaBuffer(arena, b.buffer);
}

/** `part` (one block) against `whole` (`size` blocks): in place when it is exactly block `rank`. */
export function blockAliasing(
  whole: CollectiveBuffer,
  part: CollectiveBuffer,
  rank: number,
  arena: SharedMemory | null,
): Aliasing {
  if (part.byteLength === 0 || whole.byteLength === 0 || !sameMemory(whole, part, arena)) return 'separate';
  const partEnd = part.byteOffset + part.byteLength;
  const wholeEnd = whole.byteOffset + whole.byteLength;
  if (partEnd <= whole.byteOffset || wholeEnd <= part.byteOffset) return 'separate';
  return part.byteOffset === whole.byteOffset + rank * part.byteLength ? 'in place' : 'overlap';
}

export function checkAliasing(
  kind: 'allGather' | 'reduceScatter',
  rank: number,
  output: CollectiveBuffer,
  input: CollectiveBuffer,
  arena: SharedMemory | null,
): Aliasing {
  const gather = kind === 'allGather';
  const whole = gather ? output : input;
  const part = gather ? input : output;
  const aliasing = blockAliasing(whole, part, rank, arena);
  if (aliasing !== 'overlap') return aliasing;
  const [wholeName, partName] = gather ? ['output', 'input'] : ['input', 'output'];
  const count = part.length;
  const element = part.BYTES_PER_ELEMENT;
  const at = (view: CollectiveBuffer) => `bytes ${view.byteOffset}..${view.byteOffset + view.byteLength}`;
  const inPlaceStart = whole.byteOffset + rank * part.byteLength;
  throw new CollectiveError(
    `${kind} on rank ${rank}: the ${partName} overlaps the ${wholeName} without being this rank's block of it (${partName} at ${at(part)}, ${wholeName} at ${at(whole)} of the same memory); the result would depend on the order ranks write in.`,
    {
      code: 'invalid-argument',
      op: kind,
      rank,
      expected: `an ${partName} sharing no byte with the ${wholeName}, or exactly its block ${rank}: bytes ${inPlaceStart}..${inPlaceStart + count * element} (in place)`,
      actual: `${partName} at ${at(part)}, ${wholeName} at ${at(whole)}`,
      fix: `for an in-place ${kind}, pass ${wholeName}.subarray(${rank} * ${count}, ${rank + 1} * ${count}) as the ${partName}; otherwise give the ${partName} its own buffer.`,
    },
  );
}

/**
 * [Note: segments] An op over `count` elements split among `size` ranks gives rank r the
 * elements [floor(r * count / size), floor((r + 1) * count / size)): sizes differ by at most
 * one, any count works (zero included), and every rank computes the same split.
 */
export function segmentStart(index: number, count: number, size: number): number {
  return Math.floor((index * count) / size);
}

export function segmentBounds(index: number, count: number, size: number): [number, number] {
  return [segmentStart(index, count, size), segmentStart(index + 1, count, size)];
}
