import type * as tf from '@tensorflow/tfjs-core';
import { NnError } from '../errors';
import { type ArrayKernel, runArrayKernel } from './array-kernel';

/**
 * Mean softmax cross-entropy as two array kernels (see [Note: array kernels]): logits [N, V],
 * int32 targets [N] →
 *   forward   loss = (1/N) · Σ_rows (log Σ_j e^(x_j - max) + max - x_target)
 *   backward  dlogits = dy / N · (softmax(x) - oneHot(target))
 * Row sums accumulate in float64; the backward recomputes the softmax from the saved logits.
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

/** max and log Σ e^(x - max) of one row. */
function rowLogSumExp(logits: Float32Array, base: number, classes: number): [number, number] {
  let max = Number.NEGATIVE_INFINITY;
  for (let column = 0; column < classes; column++) max = Math.max(max, logits[base + column]!);
  let sum = 0;
  for (let column = 0; column < classes; column++) sum += Math.exp(logits[base + column]! - max);
  return [max, Math.log(sum)];
}

const forwardKernel: ArrayKernel = {
  name: FORWARD,
  inputs: ['logits', 'targets'],
  outputShapes: () => [[]],
  compute([logitValues, targetValues], [loss], shapes) {
    const logits = logitValues as Float32Array;
    const targets = targetValues as Int32Array;
    const classes = shapes[0]![1]!;
    const rows = targets.length;
    let total = 0;
    for (let row = 0; row < rows; row++) {
      const base = row * classes;
      const target = targets[row]!;
      checkTarget(target, classes, row);
      const [max, logSum] = rowLogSumExp(logits, base, classes);
      total += logSum + max - logits[base + target]!;
    }
    loss![0] = total / rows;
  },
};

const backwardKernel: ArrayKernel = {
  name: BACKWARD,
  inputs: ['dy', 'logits', 'targets'],
  outputShapes: (shapes) => [[...shapes[1]!]],
  compute([dyValues, logitValues, targetValues], [dLogits], shapes) {
    const logits = logitValues as Float32Array;
    const targets = targetValues as Int32Array;
    const output = dLogits!;
    const classes = shapes[1]![1]!;
    const rows = targets.length;
    const scale = dyValues![0]! / rows;
    for (let row = 0; row < rows; row++) {
      const base = row * classes;
      const [max, logSum] = rowLogSumExp(logits, base, classes);
      const shift = max + logSum;
      for (let column = 0; column < classes; column++) {
        output[base + column] = Math.exp(logits[base + column]! - shift) * scale;
      }
      output[base + targets[row]!]! -= scale;
    }
  },
};

const gradient: tf.GradConfig = {
  kernelName: FORWARD,
  inputsToSave: ['logits', 'targets'],
  gradFunc: (dy, saved) => {
    const [logits, targets] = saved as [tf.Tensor, tf.Tensor];
    const [dLogits] = runArrayKernel(backwardKernel, null, { dy: dy as tf.Tensor, logits, targets });
    return { logits: () => dLogits! };
  },
};

/** logits [N, V] float32, targets [N] int32 → the mean cross-entropy (a scalar). */
export function crossEntropyKernel(logits: tf.Tensor, targets: tf.Tensor): tf.Scalar {
  return runArrayKernel(forwardKernel, gradient, { logits, targets })[0] as tf.Scalar;
}
