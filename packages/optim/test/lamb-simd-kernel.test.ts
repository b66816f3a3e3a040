import { describe, expect, it } from 'vitest';
import {
  type LambCoefficients,
  lambApplyKernel,
  lambMomentsKernel,
} from '../src/internal/kernels/lamb-kernel';
import {
  lambApplySimdKernel,
  lambMomentsSimdKernel,
  lambSimdAvailable,
} from '../src/internal/kernels/lamb-simd-kernel';
import { worstViolation } from './support/torch-fixtures';

const numel = 9001; // two full 4096-element chunks and a tail that is not a multiple of 4

/** p, g (non-zero everywhere), m, v. */
function arrays(seed: number, length = numel): [Float32Array, Float32Array, Float32Array, Float32Array] {
  const values = (offset: number) =>
    Float32Array.from(
      { length },
      (_, index) => Math.sin(index * 0.37 + seed + offset) + 1.5 * Math.sign(offset),
    );
  return [values(0), values(1), new Float32Array(length), new Float32Array(length)];
}

const coefficients = (step: number, eps = 1e-6): LambCoefficients => ({
  beta1: 0.9,
  beta2: 0.999,
  beta3: 0.1,
  eps,
  weightDecay: 0.01,
  biasCorrection1: 1 - 0.9 ** step,
  biasCorrection2: 1 - 0.999 ** step,
});

type Kernels = [typeof lambMomentsKernel, typeof lambApplyKernel];
const simdKernels: Kernels = [lambMomentsSimdKernel, lambApplySimdKernel];
const scalarKernels: Kernels = [lambMomentsKernel, lambApplyKernel];

/** Five LAMB steps (both phases, the trust ratio from the norms) on `state`; the last norms. */
function steps(kernels: Kernels, state: ReturnType<typeof arrays>, eps = 1e-6): Float32Array {
  const [moments, apply] = kernels;
  const norms = new Float32Array(2);
  for (let step = 1; step <= 5; step++) {
    moments(...state, coefficients(step, eps), norms, 0);
    apply(
      state[0],
      state[2],
      state[3],
      coefficients(step, eps),
      (1e-2 * Math.sqrt(norms[0]!)) / Math.sqrt(norms[1]!),
    );
  }
  return norms;
}

describe('the WebAssembly SIMD LAMB kernels', () => {
  it('are available on Node 20', () => {
    expect(lambSimdAvailable()).toBe(true);
  });

  for (const eps of [1e-6, 0]) {
    it(`match the scalar float64 kernels across chunk boundaries over 5 steps (eps ${eps}; rtol 1e-6, atol 1e-7)`, () => {
      const simd = arrays(1);
      const scalar = arrays(1);
      const simdNorms = steps(simdKernels, simd, eps);
      const scalarNorms = steps(scalarKernels, scalar, eps);
      // The padding of the last chunk adds nothing, even with eps 0 (0/0 would be NaN).
      expect(Number.isFinite(simdNorms[1])).toBe(true);
      for (const slot of [0, 1])
        expect(Math.abs(simdNorms[slot]! / scalarNorms[slot]! - 1)).toBeLessThan(1e-6);
      expect(worstViolation(simd[0], scalar[0])).toBeLessThanOrEqual(1);
      expect(worstViolation(simd[2], scalar[2])).toBeLessThanOrEqual(1);
      expect(worstViolation(simd[3], scalar[3])).toBeLessThanOrEqual(1);
      expect(Array.from(simd[0])).not.toEqual(Array.from(arrays(1)[0]));
    });
  }

  it('give every element the same bits wherever a shard boundary cuts the arrays', () => {
    // [Note: identical arithmetic for every element]: pieces at odd offsets against the whole.
    const whole = arrays(2);
    const pieces = arrays(2);
    const norms = new Float32Array(2);
    lambMomentsSimdKernel(...whole, coefficients(1), norms, 0);
    lambApplySimdKernel(whole[0], whole[2], whole[3], coefficients(1), 1e-3);
    let weightSquares = 0;
    for (const [start, end] of [
      [0, 4097],
      [4097, 4103],
      [4103, numel],
    ] as const) {
      const [p, g, m, v] = pieces.map((array) => array.subarray(start, end)) as ReturnType<typeof arrays>;
      lambMomentsSimdKernel(p, g, m, v, coefficients(1), norms, 0);
      weightSquares += norms[0]!;
      lambApplySimdKernel(p, m, v, coefficients(1), 1e-3);
    }
    for (const index of [0, 2, 3]) expect(Array.from(pieces[index]!)).toEqual(Array.from(whole[index]!));
    // The partial norms add up to the whole one (float32 storage of each part, hence 1e-6).
    const wholeNorms = new Float32Array(2);
    lambMomentsSimdKernel(...arrays(2), coefficients(1), wholeNorms, 0);
    expect(Math.abs(weightSquares / wholeNorms[0]! - 1)).toBeLessThan(1e-6);
  });

  it('write nothing past the end of the arrays', () => {
    const length = 4103;
    const guarded = arrays(3, length + 8);
    const before = guarded.map((array) => Array.from(array.subarray(length)));
    const [p, g, m, v] = guarded.map((array) => array.subarray(0, length)) as ReturnType<typeof arrays>;
    const norms = new Float32Array(2);
    lambMomentsSimdKernel(p, g, m, v, coefficients(1), norms, 0);
    lambApplySimdKernel(p, m, v, coefficients(1), 1e-3);
    guarded.forEach((array, index) => {
      expect(Array.from(array.subarray(length)), `array ${index}`).toEqual(before[index]);
    });
  });
});
