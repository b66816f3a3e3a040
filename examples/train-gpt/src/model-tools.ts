import * as tf from '@tensorflow/tfjs-core';
import type { Batch, Continue, Score } from './task';

/** Anything with the GPT's forward: tokens [B, T] int32 → logits [B, T, V]. */
export interface LanguageModel {
  forward(tokens: tf.Tensor): tf.Tensor;
}

/**
 * Mean cross-entropy over the positions where mask = 1 (the answer digits of the addition task):
 * -Σ mask · log softmax(logits)[target] / Σ mask. tfjs derives the gradient.
 */
export function maskedCrossEntropy(logits: tf.Tensor, batch: Batch): tf.Scalar {
  const classes = logits.shape[logits.rank - 1]!;
  const rows = batch.batch * batch.seqLen;
  const targets = tf.tensor1d(batch.targets, 'int32');
  const mask = tf.tensor1d(batch.mask);
  const picked = tf.sum(
    tf.mul(tf.logSoftmax(tf.reshape(logits, [rows, classes])), tf.oneHot(targets, classes)),
    1,
  );
  return tf.div(tf.neg(tf.sum(tf.mul(picked, mask))), Math.max(1, sumOf(batch.mask))) as tf.Scalar;
}

function sumOf(values: Float32Array): number {
  let total = 0;
  for (const value of values) total += value;
  return total;
}

/** Greedy decoding, one forward per new token for the whole batch (every rank in step under FSDP). */
export function greedyContinue(model: LanguageModel): Continue {
  return (prompts, count) => {
    if (prompts.length === 0) return [];
    const length = prompts[0]!.length;
    const rows = prompts.map((prompt) => Array.from(prompt));
    for (let produced = 0; produced < count; produced++) {
      const width = length + produced;
      const next = tf.tidy(() => {
        const tokens = tf.tensor2d(rows.flat(), [rows.length, width], 'int32');
        const logits = model.forward(tokens);
        const last = tf.slice(logits, [0, width - 1, 0], [rows.length, 1, logits.shape[2]!]);
        return tf.argMax(tf.reshape(last, [rows.length, logits.shape[2]!]), 1);
      });
      const ids = next.dataSync();
      next.dispose();
      rows.forEach((row, index) => {
        row.push(ids[index]!);
      });
    }
    return rows.map((row) => Int32Array.from(row.slice(length)));
  };
}

/** Masked loss and argmax accuracy of a batch without gradients. */
export function scoreBatch(model: LanguageModel): Score {
  return (batch) => {
    if (batch.batch === 0) return { loss: 0, correct: 0, counted: 0 };
    const [loss, predictions] = tf.tidy(() => {
      const tokens = tf.tensor2d(batch.tokens, [batch.batch, batch.seqLen], 'int32');
      const logits = model.forward(tokens);
      return [maskedCrossEntropy(logits, batch), tf.argMax(logits, 2)] as const;
    });
    const predicted = predictions.dataSync();
    const value = loss.dataSync()[0]!;
    tf.dispose([loss, predictions]);
    let correct = 0;
    let counted = 0;
    batch.mask.forEach((weight, index) => {
      if (weight === 0) return;
      counted += 1;
      if (predicted[index] === batch.targets[index]) correct += 1;
    });
    return { loss: value, correct, counted };
  };
}
