import * as tf from '@tensorflow/tfjs-core';
import { NnError } from '../errors';
import {
  type ArrayKernel,
  runArrayKernel,
  runArrayKernelSavingSecondOutput,
  type WasmBackendLike,
} from './array-kernel';

/**
 * Mean softmax cross-entropy as two array kernels (see [Note: array kernels]): logits [N, V],
 * int32 targets [N] →
 *   forward   p = softmax(x) per row (wasm's vectorised Softmax on wasm; float64 sums on cpu),
 *             loss = (1/N) · Σ_rows (max - x_target - log p_argmax)   (= log Σ e^(x - max) + max - x_target)
 *   backward  dlogits = dy / N · (p - oneHot(target))
 * p is saved for the backward ([Note: saved second outputs]), so the backward computes no
 * exponential: one Math.exp per element each way cost 18 ms of the 8 × 128 step (PyTorch: 2).
 * A target outside [0, V) is an NnError (tfjs's oneHot would silently give it a zero row).
 */
const FORWARD = 'FsdpSoftmaxCrossEntropy';
const BACKWARD = 'FsdpSoftmaxCrossEntropyGrad';

function checkTarget(target: number, classes: number, row: number): void {
  if (target >= 0 && target < classes) return;
  throw new NnError(`crossEntropy: target ${target} at row ${row} is not a class id in [0, ${classes}).`, {
    code: 'invalid-argument',
    expected: `class ids in [0, ${classes})`,
    actual: target,
    fix: 'check the targets against the vocabulary size (the last dimension of the logits).',
  });
}

/** Index of the largest value of one row (the first of equal ones). */
function rowArgMax(logits: Float32Array, base: number, classes: number): number {
  let best = 0;
  let max = logits[base]!;
  for (let column = 1; column < classes; column++) {
    const value = logits[base + column]!;
    if (value > max) {
      max = value;
      best = column;
    }
  }
  return best;
}

/**
 * Writes softmax of every row into `probabilities` (float64 row sums, one Math.exp per element):
 * the forward's probabilities where wasm's Softmax is not at hand (cpu).
 */
function softmaxRows(logits: Float32Array, probabilities: Float32Array, rows: number, classes: number): void {
  for (let row = 0; row < rows; row++) {
    const base = row * classes;
    const max = logits[base + rowArgMax(logits, base, classes)]!;
    let sum = 0;
    for (let column = 0; column < classes; column++) {
      const value = Math.exp(logits[base + column]! - max);
      probabilities[base + column] = value;
      sum += value;
    }
    const inverse = 1 / sum;
    for (let column = 0; column < classes; column++) probabilities[base + column]! *= inverse;
  }
}

/**
 * The mean loss from logits and their softmax: for row r with largest logit m at column a,
 * p_a = e^0 / Σ e^(x - m), so log Σ e^(x - m) = -log p_a, and the row's loss is
 * m - x_target - log p_a. p_a ≥ 1/V never underflows, so this is as accurate as the
 * log-sum-exp form in float32 (no per-element logarithm or exponential).
 */
function meanLoss(
  logits: Float32Array,
  probabilities: Float32Array,
  targets: Int32Array,
  classes: number,
): number {
  const rows = targets.length;
  let total = 0;
  for (let row = 0; row < rows; row++) {
    const base = row * classes;
    const target = targets[row]!;
    checkTarget(target, classes, row);
    const best = rowArgMax(logits, base, classes);
    total += logits[base + best]! - logits[base + target]! - Math.log(probabilities[base + best]!);
  }
  return total / rows;
}

const forwardKernel: ArrayKernel = {
  name: FORWARD,
  inputs: ['logits', 'targets'],
  outputShapes: (shapes) => [[], [...shapes[0]!]],
  compute([logitValues, targetValues], [loss, probabilities], shapes) {
    const logits = logitValues as Float32Array;
    const targets = targetValues as Int32Array;
    const classes = shapes[0]![1]!;
    for (let row = 0; row < targets.length; row++) checkTarget(targets[row]!, classes, row);
    softmaxRows(logits, probabilities!, targets.length, classes);
    loss![0] = meanLoss(logits, probabilities!, targets, classes);
  },
  wasm: wasmForward,
};

/** The forward on wasm: the probabilities by wasm's own (vectorised) Softmax on the heap. */
function wasmForward(backend: WasmBackendLike, [logits, targets]: readonly tf.TensorInfo[]): tf.TensorInfo[] {
  const classes = logits!.shape[1]!;
  {
    const ids = backend.typedArrayFromHeap(targets!) as Int32Array;
    for (let row = 0; row < ids.length; row++) checkTarget(ids[row]!, classes, row);
  }
  const loss = backend.makeOutput([], 'float32');
  const softmax = tf.getKernel('Softmax', 'wasm')!.kernelFunc;
  const probabilities = softmax({
    inputs: { logits: logits! },
    backend: backend as never,
    attrs: { dim: 1 },
  }) as tf.TensorInfo;
  // [Note: array kernels]: views taken after the last allocation.
  (backend.typedArrayFromHeap(loss) as Float32Array)[0] = meanLoss(
    backend.typedArrayFromHeap(logits!) as Float32Array,
    backend.typedArrayFromHeap(probabilities) as Float32Array,
    backend.typedArrayFromHeap(targets!) as Int32Array,
    classes,
  );
  return [loss, probabilities];
}

const backwardKernel: ArrayKernel = {
  name: BACKWARD,
  inputs: ['dy', 'probabilities', 'targets'],
  outputShapes: (shapes) => [[...shapes[1]!]],
  compute([dyValues, probabilityValues, targetValues], [dLogits], shapes) {
    const probabilities = probabilityValues as Float32Array;
    const targets = targetValues as Int32Array;
    const output = dLogits!;
    const classes = shapes[1]![1]!;
    const rows = targets.length;
    const scale = dyValues![0]! / rows;
    for (let index = 0; index < probabilities.length; index++) output[index] = probabilities[index]! * scale;
    for (let row = 0; row < rows; row++) output[row * classes + targets[row]!]! -= scale;
  },
};

/** logits [N, V] float32, targets [N] int32 → the mean cross-entropy (a scalar). */
export function crossEntropyKernel(logits: tf.Tensor, targets: tf.Tensor): tf.Scalar {
  // [Note: saved second outputs]: the probabilities are saved for the backward, not output.
  return runArrayKernelSavingSecondOutput(
    forwardKernel,
    { logits, targets },
    {},
    (dy, [, ids], probabilities) => {
      const [dLogits] = runArrayKernel(backwardKernel, null, { dy, probabilities, targets: ids! });
      return [dLogits!, tf.zerosLike(ids!)];
    },
  ) as tf.Scalar;
}
