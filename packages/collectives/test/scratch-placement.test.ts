import {
  addRoundBfloat16,
  BFLOAT16_REGIONS,
  bfloat16Kernels,
  decodeBfloat16,
  decodeScalar,
  encodeBfloat16,
  encodeScalar,
  PLACEMENT_ROOM,
  PLACEMENT_STEP,
  pageDistance,
  placementShift,
  REDUCE_REGIONS,
  reduceKernels,
  roundScalar,
  roundToBfloat16InPlace,
  SIMD_BLOCK,
} from '@fsdp-ts/kernels';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { reduceShared } from '../src/internal/shm/shm-reduce.js';

const REGIONS = [...Object.values(BFLOAT16_REGIONS), ...Object.values(REDUCE_REGIONS)];
/** A view whose byteOffset is `byteOffset` (a multiple of 4), over a buffer of its own. */
const viewAt = (byteOffset: number) => new Float32Array(new ArrayBuffer(byteOffset + 64), byteOffset, 16);

/** Pseudo-random float32 bits, finite values only (sums stay comparable bit for bit). */
function floats(length: number, seed: number): Float32Array {
  const values = new Float32Array(length);
  let state = seed;
  for (let index = 0; index < length; index++) {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    values[index] = ((state >>> 8) / 65_536 - 128) * 1.0001;
  }
  return values;
}

const bitsOf = (values: Float32Array | Uint16Array) =>
  Array.from(values instanceof Float32Array ? new Uint32Array(values.slice().buffer) : values);

describe('scratch placement ([Note: scratch placement])', () => {
  it('keeps every region at least 256 bytes from the page offset of its array, for up to seven pairs', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            region: fc.constantFrom(...REGIONS),
            byteOffset: fc.integer({ min: 0, max: 1 << 20 }),
          }),
          { minLength: 1, maxLength: 7 },
        ),
        (pairs) => {
          const arrays = pairs.map(({ byteOffset }) => viewAt(byteOffset - (byteOffset % 4)));
          const shift = placementShift(
            pairs.map(({ region }) => region),
            arrays,
          );
          expect(shift % PLACEMENT_STEP).toBe(0);
          expect(shift).toBeGreaterThanOrEqual(0);
          expect(shift).toBeLessThan(PLACEMENT_ROOM);
          for (const [index, { region }] of pairs.entries())
            expect(pageDistance(region + shift, arrays[index]!.byteOffset)).toBeGreaterThanOrEqual(256);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('moves the regions off arrays 16 bytes from them (the offsets measured 2.5-6x slower), and keeps shift 0 for arrays far away', () => {
    const input = BFLOAT16_REGIONS.input % 4096;
    const output = BFLOAT16_REGIONS.output % 4096;
    expect(
      placementShift([BFLOAT16_REGIONS.input, BFLOAT16_REGIONS.output], [viewAt(input - 16), viewAt(0)]),
    ).not.toBe(0);
    expect(
      placementShift(
        [BFLOAT16_REGIONS.input, BFLOAT16_REGIONS.output],
        [viewAt(0), viewAt(4096 + output + 16)],
      ),
    ).not.toBe(0);
    // Page-aligned arrays (fresh large buffers, at byteOffset 0) are far from every region at shift 0.
    expect(placementShift([BFLOAT16_REGIONS.input, BFLOAT16_REGIONS.output], [viewAt(0), viewAt(0)])).toBe(0);
  });

  it('computes the same bits at every shift: the bfloat16 kernels', () => {
    const kernels = bfloat16Kernels()!;
    const count = 1000; // not a multiple of 8: the kernels' extra lanes stay inside the regions
    const source = floats(count, 7);
    const halves = new Uint16Array(count);
    encodeScalar(source, halves, 0, count);
    const run = (shift: number) => {
      const views = kernels.at(shift);
      const results: number[][] = [];
      views.inputFloats.set(source);
      kernels.encode(count, shift);
      results.push(bitsOf(views.outputHalves.subarray(0, count)));
      kernels.round(count, shift);
      results.push(bitsOf(views.outputFloats.subarray(0, count)));
      kernels.encodeRound(count, shift);
      results.push(
        bitsOf(views.outputFloats.subarray(0, count)),
        bitsOf(views.encodedHalves.subarray(0, count)),
      );
      views.inputHalves.set(halves);
      kernels.decode(count, shift);
      results.push(bitsOf(views.outputFloats.subarray(0, count)));
      views.outputFloats.set(source);
      kernels.decodeAdd(count, shift);
      results.push(bitsOf(views.outputFloats.subarray(0, count)));
      views.outputFloats.set(source);
      kernels.addRound(count, shift);
      results.push(
        bitsOf(views.outputFloats.subarray(0, count)),
        bitsOf(views.encodedHalves.subarray(0, count)),
      );
      return results;
    };
    const atZero = run(0);
    const expectedEncode = bitsOf(halves);
    expect(atZero[0]).toEqual(expectedEncode);
    for (let shift = PLACEMENT_STEP; shift < PLACEMENT_ROOM; shift += PLACEMENT_STEP)
      expect(run(shift)).toEqual(atZero);
  });

  it('computes the same bits at every shift: the reduce kernels', () => {
    const kernels = reduceKernels()!;
    const count = 1003;
    const first = floats(count, 3);
    const second = floats(count, 5);
    const run = (shift: number) => {
      const views = kernels.at(shift);
      const results: number[][] = [];
      for (const name of ['sumFloat', 'maxFloat', 'minFloat'] as const) {
        views.accumulatorFloats.set(first);
        views.inputFloats.set(second);
        kernels.reduce[name](count, shift);
        results.push(bitsOf(views.accumulatorFloats.subarray(0, count)));
      }
      kernels.divide(count, 3, shift);
      results.push(bitsOf(views.accumulatorFloats.subarray(0, count)));
      return results;
    };
    const atZero = run(0);
    expect(atZero[0]).toEqual(bitsOf(first.map((value, index) => Math.fround(value + second[index]!))));
    for (let shift = PLACEMENT_STEP; shift < PLACEMENT_ROOM; shift += PLACEMENT_STEP)
      expect(run(shift)).toEqual(atZero);
  });

  it("gives the scalar loops' bits for arrays at every 256-byte page offset (each call choosing its own shift)", () => {
    const length = SIMD_BLOCK + 4097;
    const source = floats(length, 11);
    const expectedHalves = new Uint16Array(length);
    encodeScalar(source, expectedHalves, 0, length);
    const expectedDecoded = new Float32Array(length);
    decodeScalar(expectedHalves, expectedDecoded, 0, length);
    const expectedRounded = source.slice();
    roundScalar(expectedRounded, 0, length);
    const expectedSum = new Float32Array(length).map((_, index) =>
      Math.fround(source[index]! + expectedDecoded[index]!),
    );
    for (let offset = 0; offset < 4096; offset += 256) {
      const at = (elementBytes: number) => offset / elementBytes;
      const placedSource = new Float32Array(length + at(4)).subarray(at(4));
      placedSource.set(source);
      const halves = new Uint16Array(length + at(2)).subarray(at(2));
      encodeBfloat16(placedSource, halves);
      expect(bitsOf(halves)).toEqual(bitsOf(expectedHalves));
      const decoded = new Float32Array(length + at(4)).subarray(at(4));
      decodeBfloat16(halves, decoded);
      expect(bitsOf(decoded)).toEqual(bitsOf(expectedDecoded));
      roundToBfloat16InPlace(placedSource);
      expect(bitsOf(placedSource)).toEqual(bitsOf(expectedRounded));
      const target = new Float32Array(length + at(4)).subarray(at(4));
      const encoded = new Uint16Array(length + at(2)).subarray(at(2));
      addRoundBfloat16(source, halves, target, encoded);
      const expectedAddRound = expectedSum.slice();
      roundScalar(expectedAddRound, 0, length);
      expect(bitsOf(target)).toEqual(bitsOf(expectedAddRound));
      const sum = new Float32Array(length + at(4)).subarray(at(4));
      reduceShared([source, decoded], [sum], 'float32', 'sum', 2);
      expect(bitsOf(sum)).toEqual(bitsOf(expectedSum));
    }
  });
});
