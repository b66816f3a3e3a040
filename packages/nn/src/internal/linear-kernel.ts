import * as tf from '@tensorflow/tfjs-core';
import { sumRows } from './sum-rows';

/**
 * x [..., in] · weightᵀ (+ bias) with weight [out, in], as one customGrad whose forward is one
 * plain 2-D matMul and whose backward is two more, plus a ones-row matMul for the bias.
 *
 * [Note: linear kernel]
 * wasm runs transposed and batched matMuls 10-30x slower than plain 2-D ones, and its Transpose
 * and off-axis Sum are slow too, so the backward picks the cheapest plain form:
 *   dx = dy · weight                        (no transpose at all)
 *   dweight = dyᵀ · x       when out ≤ in   (transposes dy [N, out], the smaller activation)
 *   dweight = (xᵀ · dy)ᵀ    when in < out   (transposes x [N, in] and the small [in, out] result)
 *   dbias = ones[1, N] · dy                 (see [Note: reducing over rows])
 * The forward transposes only the weight ([out, in] → [in, out], small).
 */
export function linearKernel(x: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor | null): tf.Tensor {
  const [out, inFeatures] = weight.shape as [number, number];
  const rows = x.size / inFeatures;
  const flat = tf.reshape(x, [rows, inFeatures]);
  const gradients = (dy: tf.Tensor, input: tf.Tensor, savedWeight: tf.Tensor) => {
    const inputGradient = tf.matMul(dy, savedWeight);
    const weightGradient =
      out <= inFeatures
        ? tf.matMul(tf.transpose(dy), input)
        : tf.transpose(tf.matMul(tf.transpose(input), dy));
    return [inputGradient, weightGradient];
  };
  let product: tf.Tensor;
  if (bias === null) {
    const kernel = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
      const [input, w, save] = args as [tf.Tensor, tf.Tensor, tf.GradSaveFunc];
      save([input, w]);
      return {
        value: tf.matMul(input, tf.transpose(w)),
        gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) =>
          gradients(dy as tf.Tensor, saved[0]!, saved[1]!),
      };
    });
    product = kernel(flat, weight);
  } else {
    const kernel = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
      const [input, w, b, save] = args as [tf.Tensor, tf.Tensor, tf.Tensor, tf.GradSaveFunc];
      save([input, w]);
      return {
        value: tf.add(tf.matMul(input, tf.transpose(w)), b),
        gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => [
          ...gradients(dy as tf.Tensor, saved[0]!, saved[1]!),
          sumRows(dy as tf.Tensor),
        ],
      };
    });
    product = kernel(flat, weight, bias);
  }
  return tf.reshape(product, [...x.shape.slice(0, -1), out]);
}
