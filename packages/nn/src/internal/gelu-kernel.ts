import * as tf from '@tensorflow/tfjs-core';
import {
  type ArrayKernel,
  runArrayKernel,
  runArrayKernelSavingSecondOutput,
  type WasmBackendLike,
} from './array-kernel';
import { CUBIC, TWO_SQRT_2_OVER_PI } from './gelu-constants';
import { geluSimdFor } from './wasm/gelu-simd';

/**
 * tanh GELU as two array kernels (see [Note: array kernels] and [Note: tanh GELU through
 * sigmoid]): with u = 2·√(2/π)·(x + 0.044715·x³) and s = sigmoid(u),
 *   forward   y = x · s
 *   backward  dx = dy · (s + x · s · (1 - s) · 2·√(2/π)·(1 + 3·0.044715·x²))
 * The forward also outputs s (saved for the backward, see [Note: saved second outputs]), so the
 * backward computes no exponential. On wasm the forward's sigmoid is wasm's own (vectorised)
 * Sigmoid kernel function, called directly on the heap (no dispatch): a JavaScript Math.exp per
 * element made GELU 15% of the 8 × 128 step. On wasm, u and the backward are SIMD loops on the
 * heap ([Note: SIMD loops on the tfjs heap]), or these JavaScript loops if it is not reachable.
 */
const FORWARD = 'FsdpGeluTanh';
const BACKWARD = 'FsdpGeluTanhGrad';

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

/** u = 2·√(2/π)·(x + 0.044715·x³) in JavaScript (float64, rounded to float32 on store). */
export function geluInnerLoop(x: Float32Array, u: Float32Array): void {
  for (let index = 0; index < x.length; index++) {
    const value = x[index]!;
    u[index] = TWO_SQRT_2_OVER_PI * (value + CUBIC * value * value * value);
  }
}

/** dx = dy · (s + x · s · (1 - s) · 2·√(2/π)·(1 + 3·0.044715·x²)) in JavaScript. */
export function geluGradLoop(
  dy: Float32Array,
  x: Float32Array,
  sigmoid: Float32Array,
  dx: Float32Array,
): void {
  for (let index = 0; index < x.length; index++) {
    const value = x[index]!;
    const square = value * value;
    const s = sigmoid[index]!;
    const derivative = s + value * s * (1 - s) * TWO_SQRT_2_OVER_PI * (1 + 3 * CUBIC * square);
    dx[index] = dy[index]! * derivative;
  }
}

/**
 * The forward on wasm: u by the SIMD loop on the heap (JavaScript if unavailable), then s = Sigmoid(u) and y = x · s by wasm's own
 * (vectorised) Sigmoid and Multiply kernel functions on the heap, without dispatch.
 */
function wasmForward(backend: WasmBackendLike, [x]: readonly tf.TensorInfo[]): tf.TensorInfo[] {
  const shape = [...x!.shape];
  const inner = backend.makeOutput(shape, 'float32');
  {
    // [Note: array kernels]: views taken after the last allocation.
    const input = backend.typedArrayFromHeap(x!) as Float32Array;
    const u = backend.typedArrayFromHeap(inner) as Float32Array;
    const simd = geluSimdFor(backend);
    if (simd !== null) simd.geluInner(input.byteOffset, u.byteOffset, input.length);
    else geluInnerLoop(input, u);
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
  compute([dy, x, s], [dx]) {
    geluGradLoop(dy as Float32Array, x as Float32Array, s as Float32Array, dx!);
  },
  wasm: wasmBackward,
};

/** The backward on wasm: the SIMD loop on the heap (the JavaScript loop if unavailable). */
function wasmBackward(backend: WasmBackendLike, [dy, x, s]: readonly tf.TensorInfo[]): tf.TensorInfo[] {
  const output = backend.makeOutput([...x!.shape], 'float32');
  // [Note: array kernels]: views taken after the last allocation.
  const [dyValues, xValues, sValues, dxValues] = [dy!, x!, s!, output].map(
    (info) => backend.typedArrayFromHeap(info) as Float32Array,
  ) as [Float32Array, Float32Array, Float32Array, Float32Array];
  const simd = geluSimdFor(backend);
  if (simd !== null)
    simd.geluGrad(
      dyValues.byteOffset,
      xValues.byteOffset,
      sValues.byteOffset,
      dxValues.byteOffset,
      xValues.length,
    );
  else geluGradLoop(dyValues, xValues, sValues, dxValues);
  return [output];
}

/** tanh GELU of a float32 tensor (one kernel; backward one more). */
export function geluTanhKernel(x: tf.Tensor): tf.Tensor {
  // [Note: saved second outputs]: s is saved for the backward, not a second tape output.
  return runArrayKernelSavingSecondOutput(forwardKernel, { x }, {}, (dy, [input], s) => {
    const [dx] = runArrayKernel(backwardKernel, null, { dy, x: input!, s });
    return [dx!];
  });
}
