import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { layerNormSimdCalls, layerNormSimdFor } from '../src/internal/wasm/layer-norm-simd';
import { layerNorm, layerNormWithOps } from '../src/layers/layer-norm';
import { useBackend, worstRelativeError } from './support/fixtures';
import { PADDING, padded, SENTINEL, values, type WasmBackend } from './support/heap-simd-fixtures';

/**
 * Layer norm's per-row SIMD loops on the tfjs wasm heap ([Note: SIMD loops on the tfjs heap])
 * against the JavaScript loops' formulas (float64, rounded once on store), over row widths that
 * exercise the f32x4 body and the scalar tail. The SIMD loops round to float32 after every
 * operation: allowed |simd − js| ≤ 1e-6 · max(|js|, 1) (measured for y: ≤ 2.7e-7).
 */
const TOLERANCE = 1e-6;
const WIDTHS = [0, 1, 3, 5, 1031];

describe('layer norm SIMD loops on the wasm heap', () => {
  let backend: WasmBackend;
  beforeAll(async () => {
    await useBackend('wasm', true);
    backend = tf.backend() as unknown as WasmBackend;
  });
  const heap = (tensor: tf.Tensor) => backend.typedArrayFromHeap(tensor);

  it('instantiates on the backend heap once', () => {
    expect(layerNormSimdFor(backend)).not.toBeNull();
    expect(layerNormSimdFor(backend)).toBe(layerNormSimdFor(backend));
  });

  it.each(WIDTHS)(
    'a row of %i elements: y and dx match the JavaScript formulas, nothing past the end written',
    (width) => {
      const simd = layerNormSimdFor(backend)!;
      const [xValues, dyValues, gammaValues, betaValues] = [1, 2, 3, 4].map((seed) =>
        values(width, seed + width, 3),
      ) as [Float32Array, Float32Array, Float32Array, Float32Array];
      const [mean, inverseStd, meanScaled, meanProjection] = [0.25, 1.75, -0.375, 0.625];
      const [x, dy, gamma, beta] = [xValues, dyValues, gammaValues, betaValues].map(padded) as tf.Tensor1D[];
      const y = padded(new Float32Array(width).fill(SENTINEL));
      const dx = padded(new Float32Array(width).fill(SENTINEL));
      const address = (tensor: tf.Tensor) => heap(tensor).byteOffset;
      simd.layerNormRow(address(x!), address(gamma!), address(beta!), address(y), mean, inverseStd, width);
      simd.layerNormGradRow(
        address(dy!),
        address(x!),
        address(gamma!),
        address(dx),
        mean,
        inverseStd,
        meanScaled,
        meanProjection,
        width,
      );
      const expectedY = new Float32Array(width);
      const expectedDx = new Float32Array(width);
      for (let column = 0; column < width; column++) {
        const normalised = (xValues[column]! - mean) * inverseStd;
        expectedY[column] = normalised * gammaValues[column]! + betaValues[column]!;
        const scaled = dyValues[column]! * gammaValues[column]!;
        expectedDx[column] = inverseStd * (scaled - meanScaled - normalised * meanProjection);
      }
      const actualY = heap(y);
      const actualDx = heap(dx);
      expect(
        worstRelativeError(actualY.subarray(0, width), expectedY, TOLERANCE, 1).ratio,
      ).toBeLessThanOrEqual(1);
      expect(
        worstRelativeError(actualDx.subarray(0, width), expectedDx, TOLERANCE, 1).ratio,
      ).toBeLessThanOrEqual(1);
      expect(Array.from(actualY.subarray(width))).toEqual(new Array(PADDING).fill(SENTINEL));
      expect(Array.from(actualDx.subarray(width))).toEqual(new Array(PADDING).fill(SENTINEL));
      tf.dispose([x!, dy!, gamma!, beta!, y, dx]);
    },
  );

  it('is the path the layer-norm kernel takes on wasm: one call per row forward and backward', () => {
    const [rows, width] = [3, 1031];
    const x = tf.tensor2d(values(rows * width, 5, 4), [rows, width]);
    const gamma = tf.tensor1d(values(width, 6, 1));
    const beta = tf.tensor1d(values(width, 7, 1));
    const dy = tf.tensor2d(values(rows * width, 9, 1), [rows, width]);
    const before = layerNormSimdCalls();
    const kernelGrads = tf.grads((a: tf.Tensor, g: tf.Tensor, b: tf.Tensor) => layerNorm(a, g, b));
    const actual = [layerNorm(x, gamma, beta), ...kernelGrads([x, gamma, beta], dy)];
    expect(layerNormSimdCalls() - before).toBe(3 * rows); // two forwards, one backward
    const opsGrads = tf.grads((a: tf.Tensor, g: tf.Tensor, b: tf.Tensor) => layerNormWithOps(a, g, b));
    const expected = [layerNormWithOps(x, gamma, beta), ...opsGrads([x, gamma, beta], dy)];
    // The array-kernel tests' tolerance: relative 1e-5 of each tensor's largest value.
    for (const [index, tensor] of actual.entries()) {
      const expectedValues = expected[index]!.dataSync();
      const largest = Math.max(...Array.from(expectedValues, Math.abs));
      expect(worstRelativeError(tensor.dataSync(), expectedValues, 1e-5, largest).ratio).toBeLessThanOrEqual(
        1,
      );
    }
    tf.dispose([x, gamma, beta, dy, ...actual, ...expected]);
  });
});
