import * as tf from '@tensorflow/tfjs-core';

/**
 * Shared by the tests of the SIMD loops on the tfjs wasm heap ([Note: SIMD loops on the tfjs
 * heap]): deterministic inputs, and outputs followed by sentinel elements that must stay
 * untouched (the loops never write past an output's end).
 */
export const PADDING = 8; // elements after each output's end that must stay untouched
export const SENTINEL = 12345.5;

/** The slice of the wasm backend these tests read tensors through. */
export interface WasmBackend {
  typedArrayFromHeap(info: tf.TensorInfo): Float32Array;
}

/** `length` values in [-scale, scale) from a linear congruential sequence seeded by `seed`. */
export function values(length: number, seed: number, scale: number): Float32Array {
  const result = new Float32Array(length);
  let state = seed * 2654435761;
  for (let index = 0; index < length; index++) {
    state = (Math.imul(state, 1103515245) + 12345) | 0;
    result[index] = (((state >>> 8) / 2 ** 24) * 2 - 1) * scale;
  }
  return result;
}

/** A 1-D tensor of `head` followed by PADDING sentinels. */
export function padded(head: Float32Array): tf.Tensor1D {
  const all = new Float32Array(head.length + PADDING).fill(SENTINEL);
  all.set(head);
  return tf.tensor1d(all);
}
