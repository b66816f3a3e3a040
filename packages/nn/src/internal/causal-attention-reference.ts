import * as tf from '@tensorflow/tfjs-core';

/**
 * Causal multi-head attention from the fused projection qkv [B, T, 3·D] (q, k, v concatenated on
 * the last dim, heads contiguous inside each), written with plain batched tfjs ops and tfjs
 * autodiff. The reference that the fast kernel is tested against.
 */
export function causalAttentionReference(qkv: tf.Tensor, heads: number): tf.Tensor {
  const [batch, time, threeD] = qkv.shape as [number, number, number];
  const dModel = threeD / 3;
  const headSize = dModel / heads;
  const [query, key, value] = tf
    .split(qkv, 3, 2)
    .map((part) => tf.transpose(tf.reshape(part, [batch, time, heads, headSize]), [0, 2, 1, 3])) as [
    tf.Tensor,
    tf.Tensor,
    tf.Tensor,
  ];
  const scores = tf.mul(tf.matMul(query, tf.transpose(key, [0, 1, 3, 2])), 1 / Math.sqrt(headSize));
  const maskValues = new Float32Array(time * time);
  for (let row = 0; row < time; row++)
    for (let column = row + 1; column < time; column++) maskValues[row * time + column] = -1e9;
  const probabilities = tf.softmax(tf.add(scores, tf.tensor(maskValues, [time, time])));
  const mixed = tf.matMul(probabilities, value);
  return tf.reshape(tf.transpose(mixed, [0, 2, 1, 3]), [batch, time, dModel]);
}
