import type * as tf from '@tensorflow/tfjs-core';
import { type ArrayKernel, runArrayKernel } from './array-kernel';

/**
 * Layer norm over the last dimension as two array kernels (see [Note: array kernels]):
 *   forward   y = x̂ · γ + β,  x̂ = (x - mean) · rstd,  rstd = 1 / √(biased variance + ε)
 *   backward  dx = rstd · (g - mean(g) - x̂ · mean(g · x̂)),  g = dy · γ;
 *             dγ = Σ_rows dy · x̂,  dβ = Σ_rows dy
 * The backward recomputes mean and rstd from the saved x (one pass over a row) rather than
 * saving them as extra outputs. Row statistics and the column sums accumulate in float64.
 */
const FORWARD = 'FsdpLayerNorm';
const BACKWARD = 'FsdpLayerNormGrad';

/**
 * Mean and 1/√(variance + ε) of one row of x (rows of `width`), in one pass: float64 sums of x
 * and x², variance = E[x²] - mean² (float64 keeps the cancellation far below float32's resolution
 * for float32 inputs).
 */
function rowStatistics(x: Float32Array, base: number, width: number, epsilon: number): [number, number] {
  let sum = 0;
  let squares = 0;
  for (let column = 0; column < width; column++) {
    const value = x[base + column]!;
    sum += value;
    squares += value * value;
  }
  const mean = sum / width;
  const variance = Math.max(squares / width - mean * mean, 0);
  return [mean, 1 / Math.sqrt(variance + epsilon)];
}

const forwardKernel: ArrayKernel = {
  name: FORWARD,
  inputs: ['x', 'gamma', 'beta'],
  outputShapes: (shapes) => [[...shapes[0]!]],
  compute([x, gamma, beta], [y], _shapes, attrs) {
    const width = gamma!.length;
    const rows = width === 0 ? 0 : x!.length / width;
    const epsilon = attrs.epsilon as number;
    const input = x as Float32Array;
    const output = y!;
    for (let row = 0; row < rows; row++) {
      const base = row * width;
      const [mean, inverseStd] = rowStatistics(input, base, width, epsilon);
      for (let column = 0; column < width; column++) {
        output[base + column] =
          (input[base + column]! - mean) * inverseStd * gamma![column]! + beta![column]!;
      }
    }
  },
};

const backwardKernel: ArrayKernel = {
  name: BACKWARD,
  inputs: ['dy', 'x', 'gamma'],
  outputShapes: (shapes) => [[...shapes[1]!], [...shapes[2]!], [...shapes[2]!]],
  compute([dyValues, xValues, gammaValues], [dx, dGamma, dBeta], _shapes, attrs) {
    const dy = dyValues as Float32Array;
    const x = xValues as Float32Array;
    const gamma = gammaValues as Float32Array;
    const width = gamma.length;
    const rows = width === 0 ? 0 : x.length / width;
    const epsilon = attrs.epsilon as number;
    const gammaSums = new Float64Array(width);
    const betaSums = new Float64Array(width);
    for (let row = 0; row < rows; row++) {
      const base = row * width;
      const [mean, inverseStd] = rowStatistics(x, base, width, epsilon);
      let scaledSum = 0;
      let projectionSum = 0;
      for (let column = 0; column < width; column++) {
        const gradient = dy[base + column]!;
        const normalised = (x[base + column]! - mean) * inverseStd;
        const scaled = gradient * gamma[column]!;
        scaledSum += scaled;
        projectionSum += scaled * normalised;
        gammaSums[column]! += gradient * normalised;
        betaSums[column]! += gradient;
      }
      const meanScaled = scaledSum / width;
      const meanProjection = projectionSum / width;
      for (let column = 0; column < width; column++) {
        const normalised = (x[base + column]! - mean) * inverseStd;
        const scaled = dy[base + column]! * gamma[column]!;
        dx![base + column] = inverseStd * (scaled - meanScaled - normalised * meanProjection);
      }
    }
    dGamma!.set(gammaSums);
    dBeta!.set(betaSums);
  },
};

const gradient: tf.GradConfig = {
  kernelName: FORWARD,
  inputsToSave: ['x', 'gamma'],
  gradFunc: (dy, saved, attrs) => {
    const [x, gamma] = saved as [tf.Tensor, tf.Tensor];
    const [dx, dGamma, dBeta] = runArrayKernel(
      backwardKernel,
      null,
      { dy: dy as tf.Tensor, x, gamma },
      attrs,
    );
    return { x: () => dx!, gamma: () => dGamma!, beta: () => dBeta! };
  },
};

/** x [..., D] float32, gamma and beta [D] → layer norm of x (one kernel; backward one more). */
export function layerNormKernel(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: number): tf.Tensor {
  return runArrayKernel(forwardKernel, gradient, { x, gamma, beta }, { epsilon })[0]!;
}
