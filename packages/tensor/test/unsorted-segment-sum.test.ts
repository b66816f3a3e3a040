import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * The wasm UnsortedSegmentSum kernel (the gradient of every embedding lookup), which reads its
 * inputs on the wasm heap and sums into the output's heap memory, against a float64 loop written
 * here: out[ids[i], ...] += x[i, ...], ids outside [0, numSegments) dropped. Tolerance 1e-6 of
 * the largest |value| (float32 sums of at most three terms).
 */
function reference(x: number[], rowSize: number, ids: number[], numSegments: number): number[] {
  const out = new Array<number>(numSegments * rowSize).fill(0);
  ids.forEach((segment, index) => {
    if (segment < 0 || segment >= numSegments) return;
    for (let offset = 0; offset < rowSize; offset++)
      out[segment * rowSize + offset]! += x[index * rowSize + offset]!;
  });
  return out;
}

function expectClose(actual: ArrayLike<number>, expected: number[]): void {
  expect(actual.length).toBe(expected.length);
  const scale = Math.max(1, ...expected.map(Math.abs));
  for (let index = 0; index < expected.length; index++)
    expect(Math.abs(actual[index]! - expected[index]!)).toBeLessThanOrEqual(1e-6 * scale);
}

describe('UnsortedSegmentSum on wasm', () => {
  beforeAll(async () => {
    await initBackend('wasm');
  });

  it('sums rows into their segments, drops out-of-range ids, and zeroes untouched segments', () => {
    const rows = 7;
    const rowSize = 5;
    const x = Array.from({ length: rows * rowSize }, (_, index) => Math.sin(index * 1.7) * 3);
    const ids = [0, 2, 2, -1, 5, 1, 2];
    const before = tf.memory().numTensors;
    const out = tf.tidy(() =>
      tf.unsortedSegmentSum(tf.tensor2d(x, [rows, rowSize]), tf.tensor1d(ids, 'int32'), 4),
    );
    expect(out.shape).toEqual([4, rowSize]);
    expectClose(out.dataSync(), reference(x, rowSize, ids, 4));
    out.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('handles rank-2 ids over rank-3 x, int32 x, and an output larger than the input', () => {
    const x = Array.from({ length: 2 * 3 * 4 }, (_, index) => (index % 5) - 2);
    const ids = [3, 0, 3, 9, 1, 3];
    // The op's type says rank-1 ids; the kernel (TensorFlow's semantics) takes any leading shape.
    const out = tf
      .engine()
      .runKernel(
        'UnsortedSegmentSum',
        { x: tf.tensor3d(x, [2, 3, 4], 'int32'), segmentIds: tf.tensor2d(ids, [2, 3], 'int32') },
        { numSegments: 12 },
      ) as tf.Tensor;
    expect(out.dtype).toBe('int32');
    expect(Array.from(out.dataSync())).toEqual(reference(x, 4, ids, 12));
  });

  it("is gather's gradient: an embedding row's grad is the sum of its lookups' upstream grads", () => {
    const table = tf.randomNormal([6, 3], 0, 1, 'float32', 1);
    const indices = tf.tensor1d([4, 1, 4, 4, 0], 'int32');
    const upstream = Array.from({ length: 15 }, (_, index) => index * 0.25 - 1);
    const grad = tf.grad((t: tf.Tensor) =>
      tf.sum(tf.mul(tf.gather(t, indices), tf.tensor2d(upstream, [5, 3]))),
    )(table);
    expectClose(grad.dataSync(), reference(upstream, 3, [4, 1, 4, 4, 0], 6));
  });
});
