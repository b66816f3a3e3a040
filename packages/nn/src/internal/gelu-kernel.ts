import * as tf from '@tensorflow/tfjs-core';
import {
  type ArrayKernel,
  runArrayKernel,
  runArrayKernelSavingSecondOutput,
  type WasmBackendLike,
} from './array-kernel';

/**
 * tanh GELU as two array kernels (see [Note: array kernels] and [Note: tanh GELU through
 * sigmoid]): with u = 2·√(2/π)·(x + 0.044715·x³) and s = sigmoid(u),
 *   forward   y = x · s
 *   backward  dx = dy · (s + x · s · (1 - s) · 2·√(2/π)·(1 + 3·0.044715·x²))
 * The forward also outputs s (saved for the backward, see [Note: saved second outputs]), so the
 * backward computes no exponential. On wasm the forward's sigmoid is wasm's own (vectorised)
 * Sigmoid kernel function, called directly on the heap (no dispatch): a JavaScript Math.exp per
 * element made GELU 15% of the 8 × 128 step.
 */
const FORWARD = 'FsdpGeluTanh';
const BACKWARD = 'FsdpGeluTanhGrad';
const TWO_SQRT_2_OVER_PI = 2 * Math.sqrt(2 / Math.PI);
const CUBIC = 0.044715;

const forwardKernel: ArrayKernel = {
  name: FORWARD,
  inputs: ['x'],
  outputShapes: (shapes) => [[...shapes[0]!], [...shapes[0]!]],
  compute([xValues], [y, sigmoid]) {
    const x = xValues as Float32Array;
    const output = y!;
    const s = sigmoid!;
    for (let index = 0; index < x.length; index++) {
      const value = x[index]!;
      const inner = TWO_SQRT_2_OVER_PI * (value + CUBIC * value * value * value);
      const weight = 1 / (1 + Math.exp(-inner));
      s[index] = weight;
      output[index] = value * weight;
    }
  },
  wasm: wasmForward,
};

/**
 * The forward on wasm: u in JavaScript, then s = Sigmoid(u) and y = x · s by wasm's own
 * (vectorised) Sigmoid and Multiply kernel functions on the heap, without dispatch.
 */
function wasmForward(backend: WasmBackendLike, [x]: readonly tf.TensorInfo[]): tf.TensorInfo[] {
  const shape = [...x!.shape];
  const inner = backend.makeOutput(shape, 'float32');
  {
    // [Note: array kernels]: views taken after the last allocation.
    const input = backend.typedArrayFromHeap(x!) as Float32Array;
    const u = backend.typedArrayFromHeap(inner) as Float32Array;
    for (let index = 0; index < input.length; index++) {
      const value = input[index]!;
      u[index] = TWO_SQRT_2_OVER_PI * (value + CUBIC * value * value * value);
    }
  }
  const sigmoid = tf.getKernel('Sigmoid', 'wasm')!.kernelFunc({
    inputs: { x: inner },
    backend: backend as never,
    attrs: {},
  }) as tf.TensorInfo;
  backend.disposeData(inner.dataId);
  const output = tf.getKernel('Multiply', 'wasm')!.kernelFunc({
    inputs: { a: x!, b: sigmoid },
    backend: backend as never,
    attrs: {},
  }) as tf.TensorInfo;
  return [output, sigmoid];
}

const backwardKernel: ArrayKernel = {
  name: BACKWARD,
  inputs: ['dy', 'x', 's'],
  outputShapes: (shapes) => [[...shapes[1]!]],
  compute([dyValues, xValues, sValues], [dx]) {
    const dy = dyValues as Float32Array;
    const x = xValues as Float32Array;
    const sigmoid = sValues as Float32Array;
    const output = dx!;
    for (let index = 0; index < x.length; index++) {
      const value = x[index]!;
      const square = value * value;
      const s = sigmoid[index]!;
      const derivative = s + value * s * (1 - s) * TWO_SQRT_2_OVER_PI * (1 + 3 * CUBIC * square);
      output[index] = dy[index]! * derivative;
    }
  },
};

/** tanh GELU of a float32 tensor (one kernel; backward one more). */
export function geluTanhKernel(x: tf.Tensor): tf.Tensor {
  // [Note: saved second outputs]: s is saved for the backward, not a second tape output.
  return runArrayKernelSavingSecondOutput(forwardKernel, { x }, {}, (dy, [input], s) => {
    const [dx] = runArrayKernel(backwardKernel, null, { dy, x: input!, s });
    return [dx!];
  });
}
