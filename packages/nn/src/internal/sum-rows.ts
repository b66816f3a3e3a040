import * as tf from '@tensorflow/tfjs-core';

/**
 * Column sums of a 2-D tensor [rows, columns] → [columns], as ones[1, rows] · matrix.
 *
 * [Note: reducing over rows]
 * wasm (tfjs 4.22) reduces only over the innermost axis and transposes first for any other axis,
 * which made tf.sum(matrix, 0) of a [1024, 256] activation cost as much as a [1024, 256, 256]
 * matMul here. A plain 2-D matMul with a row of ones does the same sum at matMul speed.
 */
export function sumRows(matrix: tf.Tensor): tf.Tensor {
  const [rows, columns] = matrix.shape as [number, number];
  return tf.reshape(tf.matMul(tf.ones([1, rows]), matrix), [columns]);
}
