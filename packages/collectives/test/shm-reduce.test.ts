import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { finishAverage, reduceBlocks, reduceInto, reduceKernels } from '@fsdp-ts/kernels';
import { describe, expect, it } from 'vitest';
import { reduceInArena } from '../src/internal/shm/in-place-reduce.js';
import {
  arenaFull,
  createArena,
  isArenaBuffer,
  reserve,
  type SharedMemory,
} from '../src/internal/shm/shm-arena.js';
import { reduceShared } from '../src/internal/shm/shm-reduce.js';
import type { ReduceOp } from '../src/types.js';

/** float32 bit patterns of every class (zeros of both signs, subnormals, infinities, NaNs) then pseudo-random bits. */
function interestingBits(length: number, seed: number): Int32Array {
  const bits = new Int32Array(length);
  const fixed = [0, 0x80000000, 1, 0x7f800000, 0xff800000, 0x7fc00000, 0x3f800000, 0xbf800000, 0x7f7fffff];
  let state = seed;
  for (let index = 0; index < length; index++) {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    // Every source gets each special value at several positions, against every other one.
    bits[index] = index < 64 ? fixed[(index + seed) % fixed.length]! : state;
  }
  return bits;
}

/** The scalar reference: reduce-kernels.ts, source by source in rank order. */
function scalarReduce(sources: Int32Array[], float: boolean, op: ReduceOp, size: number): Int32Array {
  const result = sources[0]!.slice();
  const view = float ? new Float32Array(result.buffer) : result;
  for (const source of sources.slice(1))
    reduceInto(view, float ? new Float32Array(source.buffer) : source, op);
  if (float && op === 'avg') finishAverage(view as Float32Array, size);
  return result;
}

/** The first index where the bits differ (two float32 NaNs count as equal: payloads may differ), or -1. */
function firstDifference(actual: Int32Array, expected: Int32Array, float: boolean): number {
  const actualFloats = new Float32Array(actual.buffer, actual.byteOffset, actual.length);
  const expectedFloats = new Float32Array(expected.buffer, expected.byteOffset, expected.length);
  for (let index = 0; index < expected.length; index++) {
    if (actual[index] === expected[index]) continue;
    if (float && Number.isNaN(actualFloats[index]) && Number.isNaN(expectedFloats[index])) continue;
    return index;
  }
  return actual.length === expected.length ? -1 : expected.length;
}

describe('shm reductions (WebAssembly SIMD)', () => {
  it('has WebAssembly SIMD kernels on this runtime', () => {
    expect(reduceKernels()).not.toBeNull();
  });

  // Lengths around the kernel block (65536) and the 4-lane width, at unaligned element offsets.
  for (const [length, offset] of [
    [0, 0],
    [1, 1],
    [7, 3],
    [65_536, 0],
    [131_077, 2],
  ] as const) {
    for (const size of [1, 2, 3]) {
      it(`matches the scalar kernels bit for bit: ${length} elements at offset ${offset}, ${size} sources`, () => {
        for (const [dtype, ops] of [
          ['float32', ['sum', 'avg', 'max', 'min']],
          ['int32', ['sum', 'max', 'min']],
        ] as const) {
          const float = dtype === 'float32';
          for (const op of ops) {
            const sources = Array.from({ length: size }, (_, rank) => interestingBits(length, rank + 1));
            const expected = scalarReduce(sources, float, op, size);
            const view = (bits: Int32Array) =>
              float
                ? new Float32Array(bits.buffer, offset * 4, length)
                : new Int32Array(bits.buffer, offset * 4, length);
            const padded = sources.map((source) => {
              const copy = new Int32Array(length + offset + 3).fill(0x12345678);
              copy.set(source, offset);
              return copy;
            });
            // In place into every source, as all-reduce does, and into a separate target.
            const target = new Int32Array(length + offset + 3).fill(0x12345678);
            reduceShared(padded.map(view), [view(target)], dtype, op, size);
            reduceShared(padded.map(view), padded.map(view), dtype, op, size);
            for (const result of [target, ...padded]) {
              expect(
                firstDifference(result.subarray(offset, offset + length), expected, float),
                `${dtype} ${op}`,
              ).toBe(-1);
              // Nothing outside the views is touched.
              expect(Array.from(result.subarray(0, offset))).toEqual(new Array(offset).fill(0x12345678));
              expect(Array.from(result.subarray(offset + length))).toEqual([
                0x12345678, 0x12345678, 0x12345678,
              ]);
            }
          }
        }
      });
    }
  }

  // bfloat16 sum and avg: as reduceBlocks computes them (decode, float32 adds in rank order, one
  // division, one rounding), checked for every one of the 2^16 bit patterns against each other.
  for (const size of [1, 2, 3]) {
    it(`bfloat16 sum and avg match reduceBlocks bit for bit over all 2^16 patterns, ${size} sources`, () => {
      const length = 65_536 + 5;
      for (const op of ['sum', 'avg'] as const) {
        const sources = Array.from({ length: size }, (_, rank) =>
          Uint16Array.from({ length }, (_, index) => (index * (2 * rank + 1) + rank * 7919) & 0xffff),
        );
        const expected = new Uint16Array(length);
        reduceBlocks(sources, [expected], 'bfloat16', op, size);
        const inPlace = sources.map((source) => source.slice());
        reduceShared(inPlace, inPlace, 'bfloat16', op, size);
        const isNaN16 = (bits: number) => (bits & 0x7f80) === 0x7f80 && (bits & 0x7f) !== 0;
        for (const result of inPlace) {
          let first = -1;
          for (let index = 0; index < length && first < 0; index++) {
            const [a, b] = [result[index]!, expected[index]!];
            if (a !== b && !(isNaN16(a) && isNaN16(b))) first = index;
          }
          expect(first, `bfloat16 ${op}`).toBe(-1);
        }
      }
    });
  }
});

describe('shm reductions in place in the arena ([Note: in-place simd])', () => {
  const arena = createArena() as SharedMemory;
  const SENTINEL = 0x12345678;
  /** `length` int32 words of fresh arena memory (64-byte aligned), filled with the sentinel. */
  const words = (length: number) => {
    const offset = reserve(arena, length * 4)!;
    return new Int32Array(arena.buffer, offset, length).fill(SENTINEL);
  };
  const typed = (bits: Int32Array, float: boolean, offset: number, length: number) =>
    float
      ? new Float32Array(bits.buffer, bits.byteOffset + offset * 4, length)
      : new Int32Array(bits.buffer, bits.byteOffset + offset * 4, length);

  it('has an arena and kernels over it on this runtime', () => {
    expect(arena).not.toBeNull();
    const view = typed(words(8), true, 0, 8);
    expect(reduceInArena([view], [view], 'float32', 'sum', 1, arena)).toBe(true);
  });

  // Lengths around the in-place block (32768) and the 4-lane width (vector tails of 1-3
  // elements done by the scalar kernels), at element offsets that are not 16-byte aligned.
  for (const [length, offset] of [
    [1, 1],
    [7, 3],
    [32_768, 0],
    [65_541, 2],
  ] as const) {
    for (const size of [1, 2, 3]) {
      it(`matches the scalar kernels bit for bit and writes nothing outside the views: ${length} elements at offset ${offset}, ${size} sources`, () => {
        for (const [dtype, ops] of [
          ['float32', ['sum', 'avg', 'max', 'min']],
          ['int32', ['sum', 'max', 'min']],
        ] as const) {
          const float = dtype === 'float32';
          for (const op of ops) {
            const sources = Array.from({ length: size }, (_, rank) => interestingBits(length, rank + 11));
            const expected = scalarReduce(sources, float, op, size);
            const padded = sources.map((source) => {
              const region = words(length + offset + 3);
              region.set(source, offset);
              return region;
            });
            const target = words(length + offset + 3);
            const views = () => padded.map((region) => typed(region, float, offset, length));
            // In place into source k (an in-place reduce-scatter on rank k: its output is its
            // own block of its input), on copies: only source k changes.
            for (let k = 0; k < size; k++) {
              const copies = padded.map((region) => {
                const copy = words(region.length);
                copy.set(region);
                return copy;
              });
              const copyViews = copies.map((region) => typed(region, float, offset, length));
              expect(reduceInArena(copyViews, [copyViews[k]!], dtype, op, size, arena)).toBe(true);
              for (const [rank, copy] of copies.entries()) {
                const want = rank === k ? expected : sources[rank]!;
                expect(
                  firstDifference(copy.slice(offset, offset + length), want, float),
                  `${dtype} ${op} into source ${k}, source ${rank}`,
                ).toBe(-1);
                expect(Array.from(copy.subarray(0, offset))).toEqual(new Array(offset).fill(SENTINEL));
                expect(Array.from(copy.subarray(offset + length))).toEqual([SENTINEL, SENTINEL, SENTINEL]);
              }
            }
            // Into a separate target (reduce-scatter out of place), then in place into every source
            // (all-reduce).
            expect(
              reduceInArena(views(), [typed(target, float, offset, length)], dtype, op, size, arena),
            ).toBe(true);
            expect(reduceInArena(views(), views(), dtype, op, size, arena)).toBe(true);
            for (const result of [target, ...padded]) {
              expect(
                firstDifference(result.slice(offset, offset + length), expected, float),
                `${dtype} ${op}`,
              ).toBe(-1);
              expect(Array.from(result.subarray(0, offset))).toEqual(new Array(offset).fill(SENTINEL));
              expect(Array.from(result.subarray(offset + length))).toEqual([SENTINEL, SENTINEL, SENTINEL]);
            }
          }
        }
      });
    }
  }

  // bfloat16 sum and avg in place: as reduceBlocks computes them, over all 2^16 patterns, at an
  // element offset that is not 16-byte aligned, with a tail of 5 elements past the last 8.
  for (const size of [1, 2, 3]) {
    it(`bfloat16 sum and avg match reduceBlocks bit for bit over all 2^16 patterns, ${size} sources, writing nothing outside the views`, () => {
      const length = 65_536 + 5;
      const offset = 3;
      const isNaN16 = (bits: number) => (bits & 0x7f80) === 0x7f80 && (bits & 0x7f) !== 0;
      for (const op of ['sum', 'avg'] as const) {
        const sources = Array.from({ length: size }, (_, rank) =>
          Uint16Array.from({ length }, (_, index) => (index * (2 * rank + 1) + rank * 7919) & 0xffff),
        );
        const expected = new Uint16Array(length);
        reduceBlocks(sources, [expected], 'bfloat16', op, size);
        const regions = sources.map((source) => {
          const bits = words(Math.ceil((length + offset + 3) / 2));
          const view = new Uint16Array(bits.buffer, bits.byteOffset, (length + offset + 3) & ~1);
          view.set(source, offset);
          return view;
        });
        const views = regions.map((region) => region.subarray(offset, offset + length));
        expect(reduceInArena(views, views, 'bfloat16', op, size, arena)).toBe(true);
        for (const region of regions) {
          const result = region.subarray(offset, offset + length);
          let first = -1;
          for (let index = 0; index < length && first < 0; index++) {
            const [a, b] = [result[index]!, expected[index]!];
            if (a !== b && !(isNaN16(a) && isNaN16(b))) first = index;
          }
          expect(first, `bfloat16 ${op}`).toBe(-1);
          expect(Array.from(region.subarray(0, offset))).toEqual([0x5678, 0x1234, 0x5678]);
          expect(Array.from(region.subarray(offset + length))).toEqual([0x5678, 0x1234]);
        }
      }
    });
  }

  it('refuses, touching nothing, what it cannot compute in place', () => {
    const region = words(3 * 64);
    region.fill(7);
    const before = region.slice();
    const part = (start: number, length = 64) =>
      new Float32Array(region.buffer, region.byteOffset + start * 4, length);
    const plain = new Float32Array(new SharedArrayBuffer(256));
    // A view outside the arena.
    expect(reduceInArena([part(0), plain], [part(0), plain], 'float32', 'sum', 2, arena)).toBe(false);
    // bfloat16 max (only sum and avg have in-place kernels).
    const halves = new Uint16Array(region.buffer, region.byteOffset, 64);
    expect(reduceInArena([halves, halves], [halves], 'bfloat16', 'max', 2, arena)).toBe(false);
    // A target that is part of a later source, not all of it.
    expect(reduceInArena([part(0), part(64)], [part(64, 32)], 'float32', 'sum', 2, arena)).toBe(false);
    // A target overlapping a source without being it.
    expect(reduceInArena([part(0), part(64)], [part(128), part(32)], 'float32', 'sum', 2, arena)).toBe(false);
    expect(Array.from(region)).toEqual(Array.from(before));
  });

  it('recognises a structured clone of an arena view (as the communication worker gets it), and nothing else', () => {
    const view = typed(words(16), true, 0, 16);
    const { port1, port2 } = new MessageChannel();
    port1.postMessage(view);
    const clone = receiveMessageOnPort(port2)!.message as Float32Array;
    port1.close();
    expect(clone.buffer).not.toBe(view.buffer);
    expect(isArenaBuffer(arena, clone.buffer)).toBe(true);
    expect(clone.byteOffset).toBe(view.byteOffset);
    // Same length, same bytes except the token: not the arena.
    const copy = new SharedArrayBuffer(arena.buffer.byteLength);
    new Uint8Array(copy).set(new Uint8Array(arena.buffer));
    new Int32Array(copy)[0]! ^= 1;
    expect(isArenaBuffer(arena, copy)).toBe(false);
    expect(isArenaBuffer(createArena()!, view.buffer)).toBe(false);
  });
});

describe('arena reservations beyond its maximum ([Note: arena full])', () => {
  const PAGE = 65_536;

  it('gives back a range it could not grow to: the next allocation that fits still lands in the arena', () => {
    const arena = createArena(4)!;
    const first = reserve(arena, 1000)!;
    expect(first).toBe(64);
    // Past the 4-page maximum: the grow fails, the caller gets null (allocateShared's plain buffer).
    expect(reserve(arena, 8 * PAGE)).toBeNull();
    expect(arenaFull(arena)).toBe(false);
    // The pointer was rolled back: the next small allocation follows the first one directly.
    expect(reserve(arena, 64)).toBe(first + 1024);
    // And one that needs growing within the maximum still works.
    const grown = reserve(arena, 2 * PAGE)!;
    expect(grown).toBe(first + 1024 + 64);
    expect(arena.buffer.byteLength).toBeGreaterThanOrEqual(grown + 2 * PAGE);
    expect(arena.buffer.byteLength).toBeLessThanOrEqual(4 * PAGE);
  });

  it('sets the full flag when another thread moved the pointer before the failed grow', () => {
    const real = createArena(2)!;
    const header = new Int32Array(real.buffer, 0, 16);
    // The memory as one thread sees it while another reserves between its claim and its grow.
    const racing: SharedMemory = {
      get buffer() {
        return real.buffer;
      },
      grow(pages) {
        Atomics.add(header, 4, 1);
        return real.grow(pages);
      },
    };
    expect(reserve(racing, 4 * PAGE)).toBeNull();
    expect(arenaFull(real)).toBe(true);
  });
});
