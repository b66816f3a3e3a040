import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { geluGradLoop, geluInnerLoop } from '../src/internal/gelu-kernel';
import { geluSimdCalls, geluSimdFor } from '../src/internal/wasm/gelu-simd';
import { gelu, geluTanhWithOps } from '../src/layers/gelu';
import { useBackend, worstRelativeError } from './support/fixtures';
import { PADDING, padded, SENTINEL, values, type WasmBackend } from './support/heap-simd-fixtures';

/**
 * GELU's SIMD loops on the tfjs wasm heap ([Note: SIMD loops on the tfjs heap]) against the
 * JavaScript loops they replace, over lengths that exercise the f32x4 body and the scalar tail.
 * The SIMD loops round to float32 after every operation where the JavaScript loops round once
 * (float64 arithmetic, float32 store): allowed |simd − js| ≤ 1e-6 · max(|js|, 1), about eight
 * float32 units in the last place of a value near 1 (measured: ≤ 1.6e-7).
 */
const TOLERANCE = 1e-6;
const LENGTHS = [0, 1, 3, 5, 1031];

describe('GELU SIMD loops on the wasm heap', () => {
  let backend: WasmBackend;
  beforeAll(async () => {
    await useBackend('wasm', true);
    backend = tf.backend() as unknown as WasmBackend;
  });
  const heap = (tensor: tf.Tensor) => backend.typedArrayFromHeap(tensor);

  it('instantiates on the backend heap (this Node has WebAssembly SIMD)', () => {
    expect(geluSimdFor(backend)).not.toBeNull();
    expect(geluSimdFor(backend)).toBe(geluSimdFor(backend)); // once per memory
  });

  it.each(LENGTHS)(
    'u and dx over %i elements match the JavaScript loops, nothing past the end written',
    (length) => {
      const simd = geluSimdFor(backend)!;
      const xValues = values(length, 3 + length, 6);
      const dyValues = values(length, 7 + length, 2);
      const sValues = values(length, 11 + length, 0.5).map((value) => value + 0.5);
      const [x, dy, s] = [xValues, dyValues, sValues].map(padded) as [tf.Tensor1D, tf.Tensor1D, tf.Tensor1D];
      const u = padded(new Float32Array(length).fill(SENTINEL));
      const dx = padded(new Float32Array(length).fill(SENTINEL));
      simd.geluInner(heap(x).byteOffset, heap(u).byteOffset, length);
      simd.geluGrad(heap(dy).byteOffset, heap(x).byteOffset, heap(s).byteOffset, heap(dx).byteOffset, length);

      const expectedU = new Float32Array(length);
      geluInnerLoop(xValues, expectedU);
      const expectedDx = new Float32Array(length);
      geluGradLoop(dyValues, xValues, sValues, expectedDx);
      const actualU = heap(u);
      const actualDx = heap(dx);
      expect(
        worstRelativeError(actualU.subarray(0, length), expectedU, TOLERANCE, 1).ratio,
      ).toBeLessThanOrEqual(1);
      expect(
        worstRelativeError(actualDx.subarray(0, length), expectedDx, TOLERANCE, 1).ratio,
      ).toBeLessThanOrEqual(1);
      expect(Array.from(actualU.subarray(length))).toEqual(new Array(PADDING).fill(SENTINEL));
      expect(Array.from(actualDx.subarray(length))).toEqual(new Array(PADDING).fill(SENTINEL));
      // The inputs' padding is untouched too (read-only), and no input changed.
      expect(Array.from(heap(x))).toEqual([...xValues, ...new Array(PADDING).fill(SENTINEL)]);
      tf.dispose([x, dy, s, u, dx]);
    },
  );

  it('is the path the GELU kernel takes on wasm: forward and backward, one call each', () => {
    const x = tf.tensor2d(values(3 * 343, 5, 4), [3, 343]); // 1029 elements: body and tail
    const dy = tf.tensor2d(values(3 * 343, 9, 1), [3, 343]);
    const before = geluSimdCalls();
    const [y, [dx]] = [gelu(x), tf.grads((input: tf.Tensor) => gelu(input))([x], dy)] as const;
    expect(geluSimdCalls() - before).toBe(3); // u of the two forwards, one backward
    const expectedY = geluTanhWithOps(x);
    const expectedDx = tf.grads((input: tf.Tensor) => geluTanhWithOps(input))([x], dy)[0]!;
    // The array-kernel tests' tolerance: relative 1e-5 of each tensor's largest value.
    for (const [actual, expected] of [
      [y, expectedY],
      [dx!, expectedDx],
    ] as const) {
      const expectedValues = expected.dataSync();
      const largest = Math.max(...Array.from(expectedValues, Math.abs));
      expect(worstRelativeError(actual.dataSync(), expectedValues, 1e-5, largest).ratio).toBeLessThanOrEqual(
        1,
      );
    }
    tf.dispose([x, dy, y, dx!, expectedY, expectedDx]);
  });
});
