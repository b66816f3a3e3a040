import {
  CBLAS_NO_TRANSPOSE as N,
  nativeSgemm,
  CBLAS_ROW_MAJOR as ROW_MAJOR,
  type Sgemm,
  CBLAS_TRANSPOSE as T,
} from '@fsdp-ts/tensor/internal';
import * as tf from '@tensorflow/tfjs-core';
import { NnError } from '../errors';
import { type ArrayKernel, arrayKernelsRun, runArrayKernel } from './array-kernel';
import { addColumnSums } from './column-sums';
import { sumRows } from './sum-rows';

/**
 * [Note: linear as one kernel]
 * With OpenBLAS loaded, a Linear is one array kernel forward and one backward (see [Note: array
 * kernels]) instead of reshapes, a customGrad, a matMul, a bias add and, backward, two matMuls, a
 * ones-row matMul and more reshapes. x [..., in] is read as [rows, in] in place:
 *   forward   y = x · Wᵀ (+ b)     the bias copied into every row of y, then one sgemm (W
 *                                  transposed by flag) adding into it (beta = 1), as PyTorch's addmm
 *   backward  dx = dy · W          one sgemm
 *             dW = dyᵀ · x         one sgemm (dy transposed by flag)
 *             db = Σ_rows dy       float64 column sums, four rows per pass ([Note: float64 column sums])
 * A JavaScript pass over y for the bias and one-row-per-pass column sums for db cost ~45 ms of a
 * 540 ms step of the reference GPT at 8 × 128 (architecture/performance.md, "Linear").
 * If the BLAS kernel was switched off between a forward and its backward, the backward runs
 * as tfjs matMuls instead.
 */
const FORWARD = 'FsdpLinear';
const FORWARD_NO_BIAS = 'FsdpLinearNoBias';
const BACKWARD = 'FsdpLinearGrad';

function sgemmOrFail(): Sgemm {
  const sgemm = nativeSgemm();
  if (sgemm !== null) return sgemm;
  throw new NnError('Linear: its array kernel ran while the BLAS matMul kernel was off.', {
    code: 'invalid-argument',
    expected: 'the BLAS matMul kernel active (setNativeMatMul(true)) for the whole forward',
    actual: 'setNativeMatMul(false) or another backend during the forward',
    fix: 'switch the matMul kernel between steps, not inside one.',
  });
}

const forwardKernel = (withBias: boolean): ArrayKernel => ({
  name: withBias ? FORWARD : FORWARD_NO_BIAS,
  inputs: withBias ? ['x', 'weight', 'bias'] : ['x', 'weight'],
  outputShapes: (shapes) => [[...shapes[0]!.slice(0, -1), shapes[1]![0]!]],
  compute([xValues, weightValues, biasValues], [y], shapes) {
    const [out, inFeatures] = shapes[1] as [number, number];
    const output = y!;
    const rows = out === 0 ? 0 : output.length / out;
    const bias = biasValues as Float32Array | undefined;
    if (rows === 0 || out === 0) return;
    if (inFeatures === 0) {
      output.fill(0);
      if (bias !== undefined) for (let row = 0; row < rows; row++) output.set(bias, row * out);
      return;
    }
    const sgemm = sgemmOrFail();
    if (bias !== undefined) for (let row = 0; row < rows; row++) output.set(bias, row * out);
    sgemm(
      ROW_MAJOR,
      N,
      T,
      rows,
      out,
      inFeatures,
      1,
      xValues as Float32Array,
      inFeatures,
      weightValues as Float32Array,
      inFeatures,
      bias === undefined ? 0 : 1,
      output,
      out,
    );
  },
});
const forwardWithBias = forwardKernel(true);
const forwardWithoutBias = forwardKernel(false);

const backwardKernel: ArrayKernel = {
  name: BACKWARD,
  inputs: ['dy', 'x', 'weight'],
  outputShapes: (shapes) => [[...shapes[1]!], [...shapes[2]!], [shapes[2]![0]!]],
  compute([dyValues, xValues, weightValues], [dx, dWeight, dBias], shapes) {
    const [out, inFeatures] = shapes[2] as [number, number];
    const dy = dyValues as Float32Array;
    const rows = out === 0 ? 0 : dy.length / out;
    if (rows === 0 || out === 0) {
      dx!.fill(0);
      dWeight!.fill(0);
      dBias!.fill(0);
      return;
    }
    const sgemm = sgemmOrFail();
    const sums = new Float64Array(out);
    addColumnSums(dy, 0, rows, out, sums);
    dBias!.set(sums);
    if (inFeatures === 0) {
      dx!.fill(0);
      dWeight!.fill(0);
    } else {
      sgemm(
        ROW_MAJOR,
        N,
        N,
        rows,
        inFeatures,
        out,
        1,
        dy,
        out,
        weightValues as Float32Array,
        inFeatures,
        0,
        dx!,
        inFeatures,
      );
      sgemm(
        ROW_MAJOR,
        T,
        N,
        out,
        inFeatures,
        rows,
        1,
        dy,
        out,
        xValues as Float32Array,
        inFeatures,
        0,
        dWeight!,
        inFeatures,
      );
    }
  },
};

/** The backward as tfjs matMuls, for a BLAS kernel switched off after the forward. */
function backwardWithTfjs(dy: tf.Tensor, x: tf.Tensor, weight: tf.Tensor): tf.Tensor[] {
  const [out, inFeatures] = weight.shape as [number, number];
  const flatDy = tf.reshape(dy, [-1, out]);
  const flatX = tf.reshape(x, [-1, inFeatures]);
  return [
    tf.reshape(tf.matMul(flatDy, weight), x.shape),
    tf.matMul(flatDy, flatX, true, false),
    sumRows(flatDy),
  ];
}

const gradient = (withBias: boolean): tf.GradConfig => ({
  kernelName: withBias ? FORWARD : FORWARD_NO_BIAS,
  inputsToSave: ['x', 'weight'],
  gradFunc: (dy, saved) => {
    const [x, weight] = saved as [tf.Tensor, tf.Tensor];
    const [dx, dWeight, dBias] =
      nativeSgemm() === null || !arrayKernelsRun()
        ? backwardWithTfjs(dy as tf.Tensor, x, weight)
        : runArrayKernel(backwardKernel, null, { dy: dy as tf.Tensor, x, weight });
    return withBias
      ? { x: () => dx!, weight: () => dWeight!, bias: () => dBias! }
      : { x: () => dx!, weight: () => dWeight! };
  },
});
const gradientWithBias = gradient(true);
const gradientWithoutBias = gradient(false);

/** True when `linearBlasKernel` can run: BLAS loaded, wasm or cpu, float32 operands. */
export function linearBlasKernelRuns(x: tf.Tensor, weight: tf.Tensor): boolean {
  return arrayKernelsRun() && nativeSgemm() !== null && x.dtype === 'float32' && weight.dtype === 'float32';
}

/**
 * x [..., in] · weightᵀ (+ bias) with weight [out, in] and bias [out] as one kernel (see [Note:
 * linear as one kernel]).
 */
export function linearBlasKernel(x: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor | null): tf.Tensor {
  return bias === null
    ? runArrayKernel(forwardWithoutBias, gradientWithoutBias, { x, weight })[0]!
    : runArrayKernel(forwardWithBias, gradientWithBias, { x, weight, bias })[0]!;
}
