/**
 * A small training-shaped model written twice: in plain float64 JavaScript (the independent
 * reference, used for finite differences) and in tfjs through the bridge. Embedding -> matMul ->
 * layer norm -> matMul -> softmax cross-entropy.
 */

import { matMul } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';

export const sizes = { vocab: 5, model: 4, hidden: 6, classes: 3, tokens: 7 };
export const tokens = [0, 3, 1, 4, 4, 2, 0];
export const targets = [2, 0, 1, 1, 2, 0, 1];
export const parameterShapes: Record<string, number[]> = {
  embedding: [sizes.vocab, sizes.model],
  first: [sizes.model, sizes.hidden],
  gamma: [sizes.hidden],
  beta: [sizes.hidden],
  second: [sizes.hidden, sizes.classes],
};

export function initialValues(): Record<string, Float64Array> {
  let state = 12345;
  const next = () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648 - 0.5;
  };
  const values: Record<string, Float64Array> = {};
  for (const [name, shape] of Object.entries(parameterShapes)) {
    const numel = shape.reduce((product, size) => product * size, 1);
    values[name] = Float64Array.from({ length: numel }, () => (name === 'gamma' ? 1 + next() : next()));
  }
  return values;
}

const epsilon = 1e-5;

/** The loss in float64. */
export function referenceLoss(values: Record<string, Float64Array>): number {
  const { model, hidden, classes } = sizes;
  const embedding = values.embedding!;
  const first = values.first!;
  const gamma = values.gamma!;
  const beta = values.beta!;
  const second = values.second!;
  let total = 0;
  tokens.forEach((token, row) => {
    const h = new Float64Array(hidden);
    for (let j = 0; j < hidden; j++)
      for (let k = 0; k < model; k++) h[j]! += embedding[token * model + k]! * first[k * hidden + j]!;
    const mean = h.reduce((sum, value) => sum + value, 0) / hidden;
    const variance = h.reduce((sum, value) => sum + (value - mean) ** 2, 0) / hidden;
    const normalised = h.map(
      (value, j) => ((value - mean) / Math.sqrt(variance + epsilon)) * gamma[j]! + beta[j]!,
    );
    const logits = new Float64Array(classes);
    for (let c = 0; c < classes; c++)
      for (let j = 0; j < hidden; j++) logits[c]! += normalised[j]! * second[j * classes + c]!;
    const max = Math.max(...logits);
    const logSum = Math.log(logits.reduce((sum, value) => sum + Math.exp(value - max), 0)) + max;
    total += logSum - logits[targets[row]!]!;
  });
  return total / tokens.length;
}

/** Central finite differences of the float64 loss. */
export function finiteDifferenceGradients(
  values: Record<string, Float64Array>,
  step = 1e-6,
): Record<string, Float64Array> {
  const gradients: Record<string, Float64Array> = {};
  for (const [name, array] of Object.entries(values)) {
    gradients[name] = new Float64Array(array.length);
    for (let index = 0; index < array.length; index++) {
      const original = array[index]!;
      array[index] = original + step;
      const plus = referenceLoss(values);
      array[index] = original - step;
      const minus = referenceLoss(values);
      array[index] = original;
      gradients[name]![index] = (plus - minus) / (2 * step);
    }
  }
  return gradients;
}

/** The same loss in tfjs; parameters come in the order of `parameterShapes`. */
export function tfLoss(
  embedding: tf.Tensor,
  first: tf.Tensor,
  gamma: tf.Tensor,
  beta: tf.Tensor,
  second: tf.Tensor,
): tf.Tensor {
  const rows = tf.gather(embedding, tf.tensor1d(tokens, 'int32'));
  const h = matMul(rows, first);
  const { mean, variance } = tf.moments(h, -1, true);
  const normalised = tf.add(tf.mul(tf.div(tf.sub(h, mean), tf.sqrt(tf.add(variance, epsilon))), gamma), beta);
  const logits = matMul(normalised, second);
  const logProbabilities = tf.logSoftmax(logits);
  const picked = tf.sum(
    tf.mul(logProbabilities, tf.oneHot(tf.tensor1d(targets, 'int32'), sizes.classes)),
    -1,
  );
  return tf.neg(tf.mean(picked));
}
