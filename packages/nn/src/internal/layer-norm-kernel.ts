import type * as tf from '@tensorflow/tfjs-core';
import { type ArrayKernel, runArrayKernel, runArrayKernelSavingSecondOutput } from './array-kernel';
import { addColumnSums } from './column-sums';

/**
 * Layer norm over the last dimension as two array kernels (see [Note: array kernels]):
 *   forward   y = x̂ · γ + β,  x̂ = (x - mean) · rstd,  rstd = 1 / √(biased variance + ε)
 *   backward  dx = rstd · (g - mean(g) - x̂ · mean(g · x̂)),  g = dy · γ;
 *             dγ = Σ_rows dy · x̂,  dβ = Σ_rows dy
 * The forward also computes each row's mean and rstd ([rows, 2], saved for the backward, see
 * [Note: saved second outputs]), so the backward makes two passes over a row, not three. Row
 * statistics accumulate in float64. The column sums dγ and dβ are float64 sums four rows per pass
 * ([Note: float64 column sums]; dy · x̂ is staged in dx before dx is written): one-row-per-pass
 * read-modify-writes of the sums were about half of the backward's time.
 */
const FORWARD = 'FsdpLayerNorm';
const BACKWARD = 'FsdpLayerNormGrad';

const forwardKernel: ArrayKernel = {
  name: FORWARD,
  inputs: ['x', 'gamma', 'beta'],
  outputShapes: (shapes) => {
    const width = shapes[1]![0]!;
    const size = shapes[0]!.reduce((product, extent) => product * extent, 1);
    return [[...shapes[0]!], [width === 0 ? 0 : size / width, 2]];
  },
  compute([x, gamma, beta], [y, statistics], _shapes, attrs) {
    const width = gamma!.length;
    const rows = width === 0 ? 0 : x!.length / width;
    const epsilon = attrs.epsilon as number;
    const input = x as Float32Array;
    const output = y!;
    const stats = statistics!;
    for (let row = 0; row < rows; row++) {
      const base = row * width;
      // One pass: float64 sums of x and x², variance = E[x²] - mean² (float64 keeps the
      // cancellation far below float32's resolution for float32 inputs).
      let sum = 0;
      let squares = 0;
      for (let column = 0; column < width; column++) {
        const value = input[base + column]!;
        sum += value;
        squares += value * value;
      }
      const mean = sum / width;
      const inverseStd = 1 / Math.sqrt(Math.max(squares / width - mean * mean, 0) + epsilon);
      stats[2 * row] = mean;
      stats[2 * row + 1] = inverseStd;
      for (let column = 0; column < width; column++) {
        output[base + column] =
          (input[base + column]! - mean) * inverseStd * gamma![column]! + beta![column]!;
      }
    }
  },
};

const backwardKernel: ArrayKernel = {
  name: BACKWARD,
  inputs: ['dy', 'x', 'gamma', 'statistics'],
  outputShapes: (shapes) => [[...shapes[1]!], [...shapes[2]!], [...shapes[2]!]],
  compute([dyValues, xValues, gammaValues, statisticValues], [dx, dGamma, dBeta]) {
    const dy = dyValues as Float32Array;
    const x = xValues as Float32Array;
    const gamma = gammaValues as Float32Array;
    const stats = statisticValues as Float32Array;
    const output = dx!;
    const width = gamma.length;
    const rows = width === 0 ? 0 : x.length / width;
    const sums = new Float64Array(width);
    addColumnSums(dy, 0, rows, width, sums);
    dBeta!.set(sums);
    const means = new Float64Array(rows);
    const projections = new Float64Array(rows);
    for (let row = 0; row < rows; row++) {
      const base = row * width;
      const mean = stats[2 * row]!;
      const inverseStd = stats[2 * row + 1]!;
      let scaledSum = 0;
      let projectionSum = 0;
      for (let column = 0; column < width; column++) {
        const gradient = dy[base + column]!;
        const normalised = (x[base + column]! - mean) * inverseStd;
        const scaled = gradient * gamma[column]!;
        scaledSum += scaled;
        projectionSum += scaled * normalised;
        output[base + column] = gradient * normalised; // staged for dγ (overwritten below)
      }
      means[row] = scaledSum / width;
      projections[row] = projectionSum / width;
    }
    sums.fill(0);
    addColumnSums(output, 0, rows, width, sums);
    dGamma!.set(sums);
    for (let row = 0; row < rows; row++) {
      const base = row * width;
      const mean = stats[2 * row]!;
      const inverseStd = stats[2 * row + 1]!;
      const meanScaled = means[row]!;
      const meanProjection = projections[row]!;
      for (let column = 0; column < width; column++) {
        const normalised = (x[base + column]! - mean) * inverseStd;
        const scaled = dy[base + column]! * gamma[column]!;
        output[base + column] = inverseStd * (scaled - meanScaled - normalised * meanProjection);
      }
    }
  },
};

/** x [..., D] float32, gamma and beta [D] → layer norm of x (one kernel; backward one more). */
export function layerNormKernel(x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: number): tf.Tensor {
  // [Note: saved second outputs]: the row statistics are saved for the backward, not output.
  return runArrayKernelSavingSecondOutput(
    forwardKernel,
    { x, gamma, beta },
    { epsilon },
    (dy, [input, weight], statistics) =>
      runArrayKernel(backwardKernel, null, { dy, x: input!, gamma: weight!, statistics }),
  );
}
