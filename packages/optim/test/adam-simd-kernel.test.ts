import { kernelBlock, kernelBlockOf } from '@fsdp-ts/kernels';
import { describe, expect, it } from 'vitest';
import { type AdamCoefficients, adamKernel } from '../src/internal/kernels/adam-kernel';
import {
  adamSimdAvailable,
  adamSimdKernel,
  adamSimdPath,
  scratchShift,
} from '../src/internal/kernels/adam-simd-kernel';
import { worstViolation } from './support/torch-fixtures';

const numel = 9001; // two full 4096-element chunks and a tail that is not a multiple of 4

function arrays(seed: number): Float32Array[] {
  const values = (offset: number) =>
    Float32Array.from({ length: numel }, (_, index) => Math.sin(index * 0.37 + seed + offset));
  return [values(0), values(1), new Float32Array(numel), new Float32Array(numel), new Float32Array(numel)];
}

const coefficients = (step: number, amsgrad: boolean): AdamCoefficients => ({
  lr: 1e-2,
  beta1: 0.9,
  beta2: 0.99,
  eps: 1e-8,
  weightDecay: amsgrad ? 0.1 : 0.01,
  decoupledWeightDecay: !amsgrad,
  maximize: amsgrad,
  step,
});

describe('the WebAssembly SIMD Adam kernel', () => {
  it('is available on Node 20', () => {
    expect(adamSimdAvailable()).toBe(true);
  });

  for (const amsgrad of [false, true]) {
    it(`matches the scalar float64 kernel across chunk boundaries (amsgrad ${amsgrad}; rtol 1e-6, atol 1e-7)`, () => {
      const [data, grad, expAvg, expAvgSq, maxExpAvgSq] = arrays(1) as [
        Float32Array,
        Float32Array,
        Float32Array,
        Float32Array,
        Float32Array,
      ];
      const reference = arrays(1) as [Float32Array, Float32Array, Float32Array, Float32Array, Float32Array];
      for (let step = 1; step <= 5; step++) {
        adamSimdKernel(
          data,
          grad,
          expAvg,
          expAvgSq,
          amsgrad ? maxExpAvgSq : null,
          coefficients(step, amsgrad),
        );
        adamKernel(
          ...(reference.slice(0, 4) as [Float32Array, Float32Array, Float32Array, Float32Array]),
          amsgrad ? reference[4] : null,
          coefficients(step, amsgrad),
        );
      }
      expect(worstViolation(data, reference[0])).toBeLessThanOrEqual(1);
      expect(worstViolation(expAvgSq, reference[3])).toBeLessThanOrEqual(1);
      expect(Array.from(data)).not.toEqual(Array.from(arrays(1)[0]!));
    });
  }

  it('gives bit-identical results for any split of the elements ([Note: identical arithmetic for every element])', () => {
    const whole = arrays(2) as [Float32Array, Float32Array, Float32Array, Float32Array, Float32Array];
    const pieces = arrays(2) as [Float32Array, Float32Array, Float32Array, Float32Array, Float32Array];
    const cuts = [0, 3, 4097, 4100, 8195, numel];
    for (let step = 1; step <= 3; step++) {
      adamSimdKernel(whole[0], whole[1], whole[2], whole[3], whole[4], coefficients(step, true));
      for (let piece = 0; piece + 1 < cuts.length; piece++) {
        const [start, end] = [cuts[piece]!, cuts[piece + 1]!];
        const [data, grad, expAvg, expAvgSq, maxExpAvgSq] = pieces.map((array) =>
          array.subarray(start, end),
        ) as typeof pieces;
        adamSimdKernel(data, grad, expAvg, expAvgSq, maxExpAvgSq, coefficients(step, true));
      }
    }
    expect(Array.from(pieces[0])).toEqual(Array.from(whole[0]));
    expect(Array.from(pieces[4])).toEqual(Array.from(whole[4]));
  });

  it("places its scratch at least 256 bytes from every array's page offset ([Note: scratch off the arrays' page offsets])", () => {
    const buffer = new ArrayBuffer(1 << 20);
    const at = (byteOffset: number) => new Float32Array(buffer, byteOffset, 16);
    const pageOffset = (byteOffset: number) => byteOffset % 4096;
    const cases = [
      [0, 0, 0, 0, null],
      [0, 4096, 8192, 12288, 16384],
      [2048, 2048, 6144, 0, null],
      [512, 1024, 1536, 2048, 2560],
      [3072, 3584, 4, 508, null],
    ];
    for (const offsets of cases) {
      const chosen = scratchShift(offsets.map((offset) => (offset === null ? null : at(offset))));
      expect(chosen % 64).toBe(0);
      for (const offset of offsets) {
        if (offset === null) continue;
        const apart = Math.abs(chosen - pageOffset(offset));
        expect(
          Math.min(apart, 4096 - apart),
          `shift ${chosen} against offset ${offset}`,
        ).toBeGreaterThanOrEqual(256);
      }
    }
  });
});

describe('the SIMD Adam kernel in a kernel block ([Note: Adam in a kernel block])', () => {
  const blockNumel = 20_483; // above the block minimum; five chunks and a 3-element tail
  type Five = [Float32Array, Float32Array, Float32Array, Float32Array, Float32Array];
  const values = (seed: number) =>
    Float32Array.from({ length: blockNumel }, (_, index) => Math.sin(index * 0.37 + seed) * (seed + 1));

  /** data, grad (in the block or not), expAvg, expAvgSq, maxExpAvgSq, all in one block. */
  function inBlock(gradInBlock: boolean): Five {
    const block = kernelBlock(blockNumel);
    if (block === null) throw new Error('no kernel block on Node 20');
    block.array.set(values(1));
    const grad = gradInBlock ? block.take('grad')! : new Float32Array(blockNumel);
    const arrays = [
      block.array,
      grad,
      block.take('expAvg')!,
      block.take('expAvgSq')!,
      block.take('maxExpAvgSq')!,
    ];
    expect(arrays.every((array) => kernelBlockOf(array) === block)).toBe(gradInBlock);
    return arrays as Five;
  }
  function plain(): Five {
    return [
      values(1),
      new Float32Array(blockNumel),
      ...[0, 1, 2].map(() => new Float32Array(blockNumel)),
    ] as Five;
  }

  for (const amsgrad of [false, true]) {
    for (const gradInBlock of [true, false]) {
      it(`gives the copying path's bits (amsgrad ${amsgrad}, grad ${gradInBlock ? 'in' : 'outside'} the block)`, () => {
        const [block, copied] = [inBlock(gradInBlock), plain()];
        expect(adamSimdPath(...block)).toBe(gradInBlock ? 'in block' : 'grad copied into block');
        expect(adamSimdPath(...copied)).toBe('chunks copied');
        for (let step = 1; step <= 4; step++) {
          for (const arrays of [block, copied]) {
            arrays[1].set(values(step + 10));
            adamSimdKernel(
              arrays[0],
              arrays[1],
              arrays[2],
              arrays[3],
              amsgrad ? arrays[4] : null,
              coefficients(step, amsgrad),
            );
          }
        }
        for (const index of [0, 2, 3, 4])
          expect(Array.from(block[index]!)).toEqual(Array.from(copied[index]!));
        expect(Array.from(block[0])).not.toEqual(Array.from(values(1)));
      });
    }
  }

  it('steps pieces of block arrays as it steps them whole, and leaves the rest of the block alone', () => {
    const [whole, pieces] = [inBlock(true), inBlock(true)];
    expect(
      adamSimdPath(
        whole[0].subarray(3, 4097),
        ...(whole.slice(1, 5).map((array) => array.subarray(3, 4097)) as [
          Float32Array,
          Float32Array,
          Float32Array,
          Float32Array,
        ]),
      ),
    ).toBe('in block');
    expect(adamSimdPath(whole[0], whole[0], whole[2], whole[3], null)).toBe('chunks copied'); // overlapping
    const cuts = [0, 3, 4097, 16_386, blockNumel];
    for (let step = 1; step <= 2; step++) {
      adamSimdKernel(whole[0], whole[1], whole[2], whole[3], whole[4], coefficients(step, true));
      for (let piece = 0; piece + 1 < cuts.length; piece++) {
        const [start, end] = [cuts[piece]!, cuts[piece + 1]!];
        const [data, grad, expAvg, expAvgSq, maxExpAvgSq] = pieces.map((array) =>
          array.subarray(start, end),
        ) as Five;
        adamSimdKernel(data, grad, expAvg, expAvgSq, maxExpAvgSq, coefficients(step, true));
      }
    }
    for (const index of [0, 2, 3, 4]) expect(Array.from(pieces[index]!)).toEqual(Array.from(whole[index]!));
  });
});
