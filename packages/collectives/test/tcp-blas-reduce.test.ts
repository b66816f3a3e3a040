/**
 * The tcp data path's float32 sum through OpenBLAS ([Note: blas reduce steps]) against the scalar
 * reduction (reduce-kernels.ts), bit for bit: the kernel alone, and a ring reduce step fed as the
 * native receive feeds it. Where OpenBLAS is missing this says so and tests the fallback (the
 * SIMD kernels) only; `.ci/run` sets FSDP_EXPECT_BLAS=1 after installing OpenBLAS, and then a
 * missing library fails the test.
 */
import { createRequire } from 'node:module';
import {
  finishAverage,
  loadNativeFloatAdd,
  REDUCE_BLOCK,
  reduceInto,
  SINGLE_THREAD_ELEMENTS,
} from '@fsdp-ts/kernels';
import { describe, expect, it } from 'vitest';
import { type IncomingStep, type RingPlan, RingScratch } from '../src/internal/tcp/ring.js';
import { stepConsumer } from '../src/internal/tcp/ring-steps.js';

function koffiPath(): string | undefined {
  try {
    return createRequire(import.meta.url).resolve('koffi');
  } catch {
    return undefined;
  }
}

const loaded = process.platform === 'linux' ? loadNativeFloatAdd(koffiPath()) : undefined;
const add = loaded?.add;
const missing =
  loaded === undefined ? `not Linux (${process.platform})` : loaded.add === undefined ? loaded.reason : '';

/**
 * float32 bits: every special class against every other (zeros of both signs, subnormals, the
 * largest normals whose sum overflows, infinities, a NaN, ties that round to even), then random.
 */
function awkwardBits(length: number, seed: number): Int32Array {
  const fixed = [
    0, 0x80000000, 1, 0x80000001, 0x007fffff, 0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x7f800000,
    0xff800000, 0x7fc00000, 0x3f800000, 0x33800000, 0x3f800001, 0xb3800000, 0x4b800000, 0x3f000000,
  ];
  const bits = new Int32Array(length);
  let state = seed;
  for (let index = 0; index < length; index++) {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    bits[index] = index < 4 * fixed.length ? fixed[(index * seed + (index >> 3)) % fixed.length]! : state;
  }
  return bits;
}

function sharedFloats(bits: Int32Array): Float32Array {
  const floats = new Float32Array(new SharedArrayBuffer(bits.length * 4));
  new Int32Array(floats.buffer).set(bits);
  return floats;
}

/** The first index whose bits differ (two NaNs count as equal: payloads may differ), or -1. */
function firstDifference(actual: Float32Array, expected: Float32Array): number {
  const actualBits = new Int32Array(actual.buffer, actual.byteOffset, actual.length);
  const expectedBits = new Int32Array(expected.buffer, expected.byteOffset, expected.length);
  for (let index = 0; index < expected.length; index++) {
    if (actualBits[index] === expectedBits[index]) continue;
    if (Number.isNaN(actual[index]) && Number.isNaN(expected[index])) continue;
    return index;
  }
  return actual.length === expected.length ? -1 : expected.length;
}

const lengths = [
  0,
  1,
  SINGLE_THREAD_ELEMENTS - 1,
  SINGLE_THREAD_ELEMENTS,
  SINGLE_THREAD_ELEMENTS + 1,
  3 * SINGLE_THREAD_ELEMENTS + 7,
  REDUCE_BLOCK + 3,
];

describe('tcp float32 sum through OpenBLAS', () => {
  it('loads OpenBLAS where it is installed (required when FSDP_EXPECT_BLAS=1)', () => {
    if (add === undefined) {
      console.warn(`OpenBLAS reduce not tested: ${missing}; only the SIMD fallback runs here.`);
      if (process.env.FSDP_EXPECT_BLAS === '1') expect(missing, 'FSDP_EXPECT_BLAS=1').toBe('');
    } else expect(add.library).toMatch(/openblas/i);
  });

  it.runIf(add !== undefined)(
    'scales by 1/2, 1/4 and 1/8 bit for bit as the scalar division, subnormals included',
    () => {
      for (const length of lengths)
        for (const size of [2, 4, 8]) {
          const guard = sharedFloats(awkwardBits(length + 2, 5));
          const target = guard.subarray(0, length);
          const expected = target.slice();
          finishAverage(expected, size);
          add!.scale(target, 1 / size);
          expect(firstDifference(target, expected), `length ${length}, size ${size}`).toBe(-1);
          expect(new Int32Array(guard.buffer, length * 4, 2)).toEqual(
            awkwardBits(length + 2, 5).subarray(length),
          );
        }
    },
  );

  it.runIf(add !== undefined)(
    'adds in place bit for bit as the scalar reduction, across piece boundaries',
    () => {
      for (const length of lengths) {
        for (const offset of [0, 1]) {
          const target = sharedFloats(awkwardBits(length + offset, 3)).subarray(offset);
          const incoming = sharedFloats(awkwardBits(length + offset, 7)).subarray(offset);
          const expected = target.slice();
          reduceInto(expected, incoming, 'sum');
          const guard = sharedFloats(awkwardBits(length + 2, 3));
          const guarded = guard.subarray(0, length);
          guarded.set(target);
          add!.addInto(guarded, incoming);
          expect(firstDifference(guarded, expected), `length ${length}, offset ${offset}`).toBe(-1);
          // Nothing past the end is written.
          expect(new Int32Array(guard.buffer, length * 4, 2)).toEqual(
            awkwardBits(length + 2, 3).subarray(length),
          );
          const summed = new Float32Array(new SharedArrayBuffer(length * 4));
          add!.sumInto(summed, target, incoming);
          expect(firstDifference(summed, expected), `sumInto, length ${length}, offset ${offset}`).toBe(-1);
        }
      }
    },
  );

  // A ring reduce step fed in awkward pieces (partial elements, block and piece boundaries), as
  // the native receive feeds it (target/advance) and as node:net does (consume).
  const paths = add === undefined ? (['simd'] as const) : (['blas', 'simd'] as const);
  for (const path of paths) {
    // avg over 2 and 4 ranks: on blas, the division is an exact scale by 1/size; over 3, a division.
    for (const [op, size] of [
      ['sum', 1],
      ['avg', 2],
      ['avg', 3],
      ['avg', 4],
    ] as const) {
      for (const withBase of [false, true]) {
        it(`a ${op}${op === 'avg' ? ` over ${size}` : ''} reduce step ${withBase ? 'with a base (reduce-scatter)' : 'in place (all-reduce)'} on ${path} matches the scalar reduction`, () => {
          const length = 2 * REDUCE_BLOCK + 1031;
          const start = 5;
          const end = length - 2;
          const own = awkwardBits(length, 11);
          const incomingBits = awkwardBits(end - start, 13);
          const expected = sharedFloats(own);
          reduceInto(expected.subarray(start, end), new Float32Array(incomingBits.buffer), 'sum');
          if (op === 'avg') finishAverage(expected.subarray(start, end), size);
          const work = sharedFloats(withBase ? new Int32Array(length) : own);
          const plan: RingPlan = {
            work,
            reduceOp: op,
            initial: null,
            steps: [],
            ...(withBase ? { base: sharedFloats(own) } : {}),
          };
          const step: IncomingStep = {
            start,
            end,
            mode: 'reduce',
            wire: 'same',
            forward: 'same',
            // As ring.ts makes an average's last reduce step.
            ...(op === 'avg'
              ? { finish: (values) => finishAverage(values as Float32Array, size), averageOver: size }
              : {}),
          };
          const forwarded: Uint8Array[] = [];
          const counts = new Int32Array(2);
          // The real OpenBLAS calls, counting the scales (which path divided).
          let scales = 0;
          const counted =
            add === undefined
              ? undefined
              : {
                  ...add,
                  scale: (target: Float32Array, factor: number) => {
                    scales += 1;
                    add.scale(target, factor);
                  },
                };
          const consumer = stepConsumer(
            plan,
            step,
            (bytes) => forwarded.push(bytes.slice()),
            new RingScratch(),
            {
              add: path === 'blas' ? counted : undefined,
              counts,
            },
          );
          expect([...counts]).toEqual(path === 'blas' ? [1, 0] : [0, 1]);
          const bytes = new Uint8Array(incomingBits.buffer);
          const pieces = [3, 1, 40_001, 7, 262_143, 262_145, 5, 100_002];
          let fed = 0;
          for (let index = 0; fed < bytes.length; index++) {
            const pieceSize = Math.min(pieces[index % pieces.length]!, bytes.length - fed);
            const chunk = bytes.subarray(fed, fed + pieceSize);
            if (index % 3 === 2) consumer.consume(chunk);
            else {
              // As the native receive: into the consumer's target, as much as fits.
              let left = chunk;
              while (left.length > 0) {
                const into = consumer.target!();
                const take = Math.min(into.length, left.length);
                into.set(left.subarray(0, take));
                consumer.advance!(take);
                left = left.subarray(take);
              }
            }
            fed += pieceSize;
          }
          consumer.end();
          expect(scales > 0, 'scaled by 1/size').toBe(path === 'blas' && (size === 2 || size === 4));
          const range = work.subarray(start, end);
          expect(firstDifference(range, expected.subarray(start, end))).toBe(-1);
          const sent = new Uint8Array(forwarded.reduce((total, chunk) => total + chunk.length, 0));
          let at = 0;
          for (const chunk of forwarded) {
            sent.set(chunk, at);
            at += chunk.length;
          }
          expect(firstDifference(new Float32Array(sent.buffer), expected.subarray(start, end))).toBe(-1);
          if (withBase) expect(new Int32Array(plan.base!.buffer)).toEqual(own);
        });
      }
    }
  }
});
