import * as tf from '@tensorflow/tfjs-core';

/** `value` in forward; its whole gradient goes to `onGradient` (see [Note: full-shard layers], 2). */
export function tap(
  value: tf.Tensor,
  anchor: tf.Tensor,
  onGradient: (gradient: tf.Tensor) => void,
): tf.Tensor {
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const anchorInput = args[1] as tf.Tensor;
    return {
      value: tf.clone(args[0] as tf.Tensor),
      gradFunc: (dy: tf.Tensor | tf.Tensor[]) => {
        onGradient(dy as tf.Tensor);
        return [dy as tf.Tensor, tf.zerosLike(anchorInput)];
      },
    };
  });
  return op(value, anchor);
}
