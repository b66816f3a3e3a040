import { isNativeMatMulActive } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { linearBlasKernel, linearBlasKernelRuns } from './linear-blas-kernel';
import { sumRows } from './sum-rows';

/**
 * x [..., in] · weightᵀ (+ bias) with weight [out, in], as one customGrad whose forward is one
 * 2-D matMul and whose backward is two more, plus a ones-row matMul for the bias.
 *
 * [Note: linear kernel]
 * With the BLAS matMul kernel (`isNativeMatMulActive()`), transposes are CBLAS flags and cost
 * nothing, so nothing is materialised:
 *   y = x · weightᵀ           matMul(x, weight, false, true)
 *   dx = dy · weight
 *   dweight = dyᵀ · x         matMul(dy, x, true, false)
 * On tfjs's own kernels, wasm runs transposed and batched matMuls 10-30x slower than plain 2-D
 * ones, and its Transpose and off-axis Sum are slow too, so the backward picks the cheapest plain
 * form:
 *   y = x · transpose(weight)               (transposes the small weight, every forward)
 *   dx = dy · weight                        (no transpose at all)
 *   dweight = dyᵀ · x       when out ≤ in   (transposes dy [N, out], the smaller activation)
 *   dweight = (xᵀ · dy)ᵀ    when in < out   (transposes x [N, in] and the small [in, out] result)
 * Either way dbias = ones[1, N] · dy (see [Note: reducing over rows]).
 */
export function linearKernel(x: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor | null): tf.Tensor {
  // With OpenBLAS on wasm or cpu: one kernel each way (see [Note: linear as one kernel]).
  if (linearBlasKernelRuns(x, weight) && (bias === null || bias.dtype === 'float32')) {
    return linearBlasKernel(x, weight, bias);
  }
  return linearWithMatMuls(x, weight, bias);
}

/** The Linear as tfjs matMuls (see the note above): without BLAS, and the kernel's test oracle. */
export function linearWithMatMuls(x: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor | null): tf.Tensor {
  const [out, inFeatures] = weight.shape as [number, number];
  const rows = x.size / inFeatures;
  const flat = tf.reshape(x, [rows, inFeatures]);
  const flags = isNativeMatMulActive();
  const forward = (input: tf.Tensor, w: tf.Tensor) =>
    flags ? tf.matMul(input, w, false, true) : tf.matMul(input, tf.transpose(w));
  const gradients = (dy: tf.Tensor, input: tf.Tensor, savedWeight: tf.Tensor) => {
    const inputGradient = tf.matMul(dy, savedWeight);
    let weightGradient: tf.Tensor;
    if (flags) weightGradient = tf.matMul(dy, input, true, false);
    else if (out <= inFeatures) weightGradient = tf.matMul(tf.transpose(dy), input);
    else weightGradient = tf.transpose(tf.matMul(tf.transpose(input), dy));
    return [inputGradient, weightGradient];
  };
  let product: tf.Tensor;
  if (bias === null) {
    const kernel = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
      const [input, w, save] = args as [tf.Tensor, tf.Tensor, tf.GradSaveFunc];
      save([input, w]);
      return {
        value: forward(input, w),
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
        value: tf.add(forward(input, w), b),
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
