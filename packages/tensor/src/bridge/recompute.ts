import * as tf from '@tensorflow/tfjs-core';
import { nestedGradients } from './nested-gradients';

/**
 * Activation recomputation: `recompute(fn)` computes like `fn`, but keeps only its inputs during
 * forward; its gradient re-runs `fn` under the tape (see [Note: nested tape]) and differentiates
 * that. Memory of the intermediate activations is traded for one extra forward.
 *
 * `fn` must be deterministic (the same inputs give the same output) and return one tensor.
 */
export function recompute<Inputs extends tf.Tensor[]>(
  fn: (...inputs: Inputs) => tf.Tensor,
): (...inputs: Inputs) => tf.Tensor {
  const wrapped = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const save = args[args.length - 1] as tf.GradSaveFunc;
    const inputs = args.slice(0, -1) as Inputs;
    save(inputs);
    const value = fn(...inputs);
    return {
      value,
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const { value: recomputed, gradients } = nestedGradients(
          (...again: tf.Tensor[]) => fn(...(again as Inputs)),
          saved,
          dy as tf.Tensor,
        );
        recomputed.dispose();
        return gradients;
      },
    };
  });
  return (...inputs: Inputs) => wrapped(...inputs);
}
