import * as tf from '@tensorflow/tfjs-core';

/**
 * `output` unchanged in forward; in backward, `beforeBackward()` runs before tfjs computes the
 * gradient of anything that produced `output`.
 *
 * [Note: pre-backward hook]
 * tfjs runs gradient functions in reverse order of recording. This identity is recorded after every
 * op of the unit's forward, so its gradient function runs before theirs: the moment to bring the
 * unit's parameters back (see [Note: released parameters]). The anchor input keeps it on a path
 * from a differentiated tensor even when nothing else the unit computed is; its value is shared
 * with `output` (tf.clone shares the dataId, see [Note: shared identity] in @fsdp-ts/tensor).
 */
export function preBackwardHook(output: tf.Tensor, anchor: tf.Tensor, beforeBackward: () => void): tf.Tensor {
  const hook = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const input = args[0] as tf.Tensor;
    const anchorInput = args[1] as tf.Tensor;
    return {
      value: tf.clone(input),
      gradFunc: (dy: tf.Tensor | tf.Tensor[]) => {
        beforeBackward();
        return [dy as tf.Tensor, tf.zerosLike(anchorInput)];
      },
    };
  });
  return hook(output, anchor);
}
