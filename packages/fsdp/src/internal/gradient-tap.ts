import * as tf from '@tensorflow/tfjs-core';

/**
 * [Note: gradient taps]
 * Units computed on the outer tape (the root unit; every unit under shard-grad-op and no-shard,
 * which keep activations) see their Parameters through taps: `tap(raw, anchor)` is `raw` in
 * forward; in backward its gradient function receives the Parameter's whole gradient (tfjs has
 * summed every use of the tapped tensor by then) and hands it to `onGradient`. `raw` is a
 * constant to tfjs: the tap takes the step's anchor as a second input, which `backward`
 * differentiates against (BackwardPlan.extraInputs), so tfjs runs the tap's gradient function.
 * Once `onGradient` has copied the gradient, the tap disposes it: tfjs would keep it until the
 * whole backward ends (on wasm, a unit's worth of heap per unit). The gradient returned for `raw`
 * is never read, since `raw` is a constant that tfjs prunes from the tape.
 */
export function tapGradient(
  raw: tf.Tensor,
  anchor: tf.Tensor,
  onGradient: (gradient: tf.Tensor) => void,
): tf.Tensor {
  const tap = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const input = args[0] as tf.Tensor;
    const anchorInput = args[1] as tf.Tensor;
    return {
      value: tf.clone(input),
      gradFunc: (dy: tf.Tensor | tf.Tensor[]) => {
        const gradient = dy as tf.Tensor;
        onGradient(gradient);
        gradient.dispose();
        return [gradient, tf.zerosLike(anchorInput)];
      },
    };
  });
  return tap(raw, anchor);
}
