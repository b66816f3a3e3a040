import * as tf from '@tensorflow/tfjs-core';
import { arrayKernelsRun } from '../internal/array-kernel';
import { geluTanhKernel } from '../internal/gelu-kernel';
import { Module } from '../module';

/** GELU's formula: the tanh approximation or the exact erf form. */
export type GeluApproximation = 'tanh' | 'none';

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
const CUBIC = 0.044715;
const INVERSE_SQRT_2 = Math.SQRT1_2;
const INVERSE_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);

/**
 * GELU(x) = x · Φ(x).
 *   - 'tanh' (GPT-2's): 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))), PyTorch's
 *     `approximate='tanh'`.
 *   - 'none' (exact, PyTorch's default): 0.5 · x · (1 + erf(x / √2)), with erf by
 *     Abramowitz-Stegun 7.1.26 (|error| <= 1.5e-7, below float32 resolution of values near 1).
 * Both have their derivative written out (one customGrad each); the exact form's is Φ(x) + x · φ(x),
 * the tanh form's is in [Note: tanh GELU through sigmoid].
 */
export function gelu(x: tf.Tensor, approximation: GeluApproximation = 'tanh'): tf.Tensor {
  if (approximation !== 'tanh') return geluExact(x);
  // On wasm and cpu, one kernel forward and one backward (see [Note: array kernels]).
  return arrayKernelsRun() && x.dtype === 'float32' ? geluTanhKernel(x) : geluTanhWithOps(x);
}

// [Note: tanh GELU through sigmoid]
// 0.5 · (1 + tanh(z)) = sigmoid(2z), and wasm's Sigmoid is vectorised while its Tanh is not
// (~20x slower here), so with u = 2z = 2·√(2/π)·(x + 0.044715·x³) and s = sigmoid(u):
// GELU(x) = x · s, and GELU'(x) = s + x · s · (1 - s) · 2·√(2/π)·(1 + 3·0.044715·x²).
/** tanh GELU as tfjs ops: other backends, and the kernel's test oracle. */
export const geluTanhWithOps = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
  const x = args[0] as tf.Tensor;
  const save = args[1] as tf.GradSaveFunc;
  const inner = tf.mul(x, tf.add(tf.mul(tf.square(x), 2 * CUBIC * SQRT_2_OVER_PI), 2 * SQRT_2_OVER_PI));
  const s = tf.sigmoid(inner);
  save([x, s]);
  return {
    value: tf.mul(x, s),
    gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
      const [input, savedS] = saved as [tf.Tensor, tf.Tensor];
      const innerDerivative = tf.add(
        tf.mul(tf.square(input), 6 * CUBIC * SQRT_2_OVER_PI),
        2 * SQRT_2_OVER_PI,
      );
      const sigmoidDerivative = tf.mul(savedS, tf.sub(1, savedS));
      const derivative = tf.add(savedS, tf.mul(tf.mul(input, sigmoidDerivative), innerDerivative));
      return [tf.mul(dy as tf.Tensor, derivative)];
    },
  };
});

const geluExact = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
  const x = args[0] as tf.Tensor;
  const save = args[1] as tf.GradSaveFunc;
  const cdf = tf.mul(tf.add(erf(tf.mul(x, INVERSE_SQRT_2)), 1), 0.5);
  save([x, cdf]);
  return {
    value: tf.mul(x, cdf),
    gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
      const [input, savedCdf] = saved as [tf.Tensor, tf.Tensor];
      const density = tf.mul(tf.exp(tf.mul(tf.square(input), -0.5)), INVERSE_SQRT_2PI);
      return [tf.mul(dy as tf.Tensor, tf.add(savedCdf, tf.mul(input, density)))];
    },
  };
});

/**
 * erf(x) by Abramowitz and Stegun 7.1.26: 1 - (a1·t + a2·t² + a3·t³ + a4·t⁴ + a5·t⁵)·e^(-x²),
 * t = 1 / (1 + p·|x|), odd extension to x < 0; absolute error <= 1.5e-7. Forward only (GELU
 * differentiates Φ analytically).
 */
export function erf(x: tf.Tensor): tf.Tensor {
  const p = 0.3275911;
  const [a1, a2, a3, a4, a5] = [0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429];
  const magnitude = tf.abs(x);
  const t = tf.div(1, tf.add(tf.mul(magnitude, p), 1));
  let polynomial = tf.add(tf.mul(t, a5), a4);
  polynomial = tf.add(tf.mul(polynomial, t), a3);
  polynomial = tf.add(tf.mul(polynomial, t), a2);
  polynomial = tf.add(tf.mul(polynomial, t), a1);
  polynomial = tf.mul(polynomial, t);
  const value = tf.sub(1, tf.mul(polynomial, tf.exp(tf.neg(tf.square(magnitude)))));
  return tf.mul(value, tf.sign(x));
}

/** GELU as a module (no parameters). */
export class GELU extends Module {
  readonly approximation: GeluApproximation;

  constructor(approximation: GeluApproximation = 'tanh') {
    super();
    this.approximation = approximation;
  }

  forward(x: tf.Tensor): tf.Tensor {
    return gelu(x, this.approximation);
  }
}
