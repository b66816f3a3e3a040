import type * as tf from '@tensorflow/tfjs-core';
import {
  type ArrayKernel,
  runArrayKernel,
  runArrayKernelSavingSecondOutput,
  type WasmBackendLike,
} from './array-kernel';
import { type LayerNormSimd, layerNormSimdFor } from './wasm/layer-norm-simd';

/**
 * Layer norm over the last dimension as two array kernels (see [Note: array kernels]):
 *   forward   y = x̂ · γ + β,  x̂ = (x - mean) · rstd,  rstd = 1 / √(biased variance + ε)
 *   backward  dx = rstd · (g - mean(g) - x̂ · mean(g · x̂)),  g = dy · γ;
 *             dγ = Σ_rows dy · x̂,  dβ = Σ_rows dy
 * The forward also computes each row's mean and rstd ([rows, 2], saved for the backward, see
 * [Note: saved second outputs]), so the backward makes two passes over a row, not three. Row
 * statistics accumulate in float64. The row reductions and the column sums dγ, dβ (float64, [Note:
 * float64 column sums]) are one pass over four rows at a time (`reduceRows`), then dx one more.
 * On wasm the per-element passes (y, dx) are SIMD loops on the heap, one call per row
 * ([Note: SIMD loops on the tfjs heap]); the reductions stay JavaScript float64.
 */
const FORWARD = 'FsdpLayerNorm';
const BACKWARD = 'FsdpLayerNormGrad';
const BYTES = 4; // per float32

/**
 * The wasm kernel function of `kernel` running `loops` on heap views ([Note: array kernels]: the
 * views are taken after every output is allocated), so the loops' arrays' byteOffsets are heap
 * addresses.
 */
function onHeap(
  backend: WasmBackendLike,
  kernel: ArrayKernel,
  inputs: readonly tf.TensorInfo[],
  attrs: tf.NamedAttrMap,
  loops: (inputs: Float32Array[], outputs: Float32Array[]) => void,
): tf.TensorInfo[] {
  const shapes = inputs.map((info) => info.shape);
  const outputs = kernel.outputShapes(shapes, attrs).map((shape) => backend.makeOutput(shape, 'float32'));
  const view = (info: tf.TensorInfo) => backend.typedArrayFromHeap(info) as Float32Array;
  loops(inputs.map(view), outputs.map(view));
  return outputs;
}

/** The forward's rows; `simd` (heap views only) runs y's pass, else JavaScript does. */
function forwardRows(
  input: Float32Array,
  gamma: Float32Array,
  beta: Float32Array,
  output: Float32Array,
  stats: Float32Array,
  attrs: tf.NamedAttrMap,
  simd: LayerNormSimd | null,
): void {
  const width = gamma.length;
  const rows = width === 0 ? 0 : input.length / width;
  const epsilon = attrs.epsilon as number;
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
    if (simd !== null) {
      const offset = base * BYTES;
      simd.layerNormRow(
        input.byteOffset + offset,
        gamma.byteOffset,
        beta.byteOffset,
        output.byteOffset + offset,
        mean,
        inverseStd,
        width,
      );
      continue;
    }
    for (let column = 0; column < width; column++) {
      output[base + column] = (input[base + column]! - mean) * inverseStd * gamma[column]! + beta[column]!;
    }
  }
}

const forwardKernel: ArrayKernel = {
  name: FORWARD,
  inputs: ['x', 'gamma', 'beta'],
  outputShapes: (shapes) => {
    const width = shapes[1]![0]!;
    const size = shapes[0]!.reduce((product, extent) => product * extent, 1);
    return [[...shapes[0]!], [width === 0 ? 0 : size / width, 2]];
  },
  compute([x, gamma, beta], [y, statistics], _shapes, attrs) {
    forwardRows(x as Float32Array, gamma as Float32Array, beta as Float32Array, y!, statistics!, attrs, null);
  },
  wasm: (backend, inputs, attrs) =>
    onHeap(backend, forwardKernel, inputs, attrs, ([x, gamma, beta], [y, statistics]) =>
      forwardRows(x!, gamma!, beta!, y!, statistics!, attrs, layerNormSimdFor(backend)),
    ),
};

/**
 * The backward's reductions in one pass over dy and x: per row mean(g) and mean(g · x̂) (g = dy · γ)
 * into `means` and `projections`, and the column sums dγ = Σ dy · x̂, dβ = Σ dy, all float64
 * ([Note: float64 column sums]). Four rows per pass, so the column sums are read and written once
 * per four rows.
 */
function reduceRows(
  dy: Float32Array,
  x: Float32Array,
  gamma: Float32Array,
  stats: Float32Array,
  rows: number,
  means: Float64Array,
  projections: Float64Array,
  gammaSums: Float64Array,
  betaSums: Float64Array,
): void {
  const width = gamma.length;
  let row = 0;
  for (; row + 4 <= rows; row += 4) {
    const b0 = row * width;
    const b1 = b0 + width;
    const b2 = b1 + width;
    const b3 = b2 + width;
    const m0 = stats[2 * row]!;
    const s0 = stats[2 * row + 1]!;
    const m1 = stats[2 * row + 2]!;
    const s1 = stats[2 * row + 3]!;
    const m2 = stats[2 * row + 4]!;
    const s2 = stats[2 * row + 5]!;
    const m3 = stats[2 * row + 6]!;
    const s3 = stats[2 * row + 7]!;
    let g0 = 0;
    let g1 = 0;
    let g2 = 0;
    let g3 = 0;
    let p0 = 0;
    let p1 = 0;
    let p2 = 0;
    let p3 = 0;
    for (let column = 0; column < width; column++) {
      const weight = gamma[column]!;
      const d0 = dy[b0 + column]!;
      const d1 = dy[b1 + column]!;
      const d2 = dy[b2 + column]!;
      const d3 = dy[b3 + column]!;
      const n0 = (x[b0 + column]! - m0) * s0;
      const n1 = (x[b1 + column]! - m1) * s1;
      const n2 = (x[b2 + column]! - m2) * s2;
      const n3 = (x[b3 + column]! - m3) * s3;
      g0 += d0 * weight;
      g1 += d1 * weight;
      g2 += d2 * weight;
      g3 += d3 * weight;
      p0 += d0 * weight * n0;
      p1 += d1 * weight * n1;
      p2 += d2 * weight * n2;
      p3 += d3 * weight * n3;
      gammaSums[column]! += d0 * n0 + d1 * n1 + (d2 * n2 + d3 * n3);
      betaSums[column]! += d0 + d1 + (d2 + d3);
    }
    means[row] = g0 / width;
    means[row + 1] = g1 / width;
    means[row + 2] = g2 / width;
    means[row + 3] = g3 / width;
    projections[row] = p0 / width;
    projections[row + 1] = p1 / width;
    projections[row + 2] = p2 / width;
    projections[row + 3] = p3 / width;
  }
  for (; row < rows; row++) {
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
      gammaSums[column]! += gradient * normalised;
      betaSums[column]! += gradient;
    }
    means[row] = scaledSum / width;
    projections[row] = projectionSum / width;
  }
}

/** The backward: reductions in JavaScript float64; `simd` (heap views only) runs dx's pass. */
function backwardRows(
  [dy, x, gamma, stats]: readonly Float32Array[],
  [output, dGamma, dBeta]: readonly Float32Array[],
  simd: LayerNormSimd | null,
): void {
  const width = gamma!.length;
  const rows = width === 0 ? 0 : x!.length / width;
  const means = new Float64Array(rows);
  const projections = new Float64Array(rows);
  const gammaSums = new Float64Array(width);
  const betaSums = new Float64Array(width);
  reduceRows(dy!, x!, gamma!, stats!, rows, means, projections, gammaSums, betaSums);
  dGamma!.set(gammaSums);
  dBeta!.set(betaSums);
  for (let row = 0; row < rows; row++) {
    const base = row * width;
    const mean = stats![2 * row]!;
    const inverseStd = stats![2 * row + 1]!;
    const meanScaled = means[row]!;
    const meanProjection = projections[row]!;
    if (simd !== null) {
      const offset = base * BYTES;
      simd.layerNormGradRow(
        dy!.byteOffset + offset,
        x!.byteOffset + offset,
        gamma!.byteOffset,
        output!.byteOffset + offset,
        mean,
        inverseStd,
        meanScaled,
        meanProjection,
        width,
      );
      continue;
    }
    for (let column = 0; column < width; column++) {
      const normalised = (x![base + column]! - mean) * inverseStd;
      const scaled = dy![base + column]! * gamma![column]!;
      output![base + column] = inverseStd * (scaled - meanScaled - normalised * meanProjection);
    }
  }
}

const backwardKernel: ArrayKernel = {
  name: BACKWARD,
  inputs: ['dy', 'x', 'gamma', 'statistics'],
  outputShapes: (shapes) => [[...shapes[1]!], [...shapes[2]!], [...shapes[2]!]],
  compute([dy, x, gamma, statistics], [dx, dGamma, dBeta]) {
    const arrays = [dy, x, gamma, statistics] as Float32Array[];
    backwardRows(arrays, [dx!, dGamma!, dBeta!], null);
  },
  wasm: (backend, inputs, attrs) =>
    onHeap(backend, backwardKernel, inputs, attrs, (arrays, outputs) =>
      backwardRows(arrays, outputs, layerNormSimdFor(backend)),
    ),
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
