import type * as tf from '@tensorflow/tfjs-core';
import { type ArrayKernel, runArrayKernel } from './array-kernel';

/**
 * tanh GELU as two array kernels (see [Note: array kernels] and [Note: tanh GELU through
 * sigmoid]): with u = 2·√(2/π)·(x + 0.044715·x³) and s = sigmoid(u),
 *   forward   y = x · s
 *   backward  dx = dy · (s + x · s · (1 - s) · 2·√(2/π)·(1 + 3·0.044715·x²))
 * The forward also outputs s (the tape saves it; the caller drops its own handle), so the
 * backward computes no exponential.
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
};

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

const gradient: tf.GradConfig = {
  kernelName: FORWARD,
  inputsToSave: ['x'],
  outputsToSave: [false, true],
  gradFunc: (dy, saved) => {
    const dOutput = Array.isArray(dy) ? dy[0]! : dy;
    const [dx] = runArrayKernel(backwardKernel, null, { dy: dOutput, x: saved[0]!, s: saved[1]! });
    return { x: () => dx! };
  },
};

/** tanh GELU of a float32 tensor (one kernel; backward one more). */
export function geluTanhKernel(x: tf.Tensor): tf.Tensor {
  const [y, s] = runArrayKernel(forwardKernel, gradient, { x });
  s!.dispose(); // the tape holds its own reference when a gradient is being taken
  return y!;
}
