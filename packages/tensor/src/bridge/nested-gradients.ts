import * as tf from '@tensorflow/tfjs-core';

interface EngineTapeState {
  activeTape: unknown;
}

/**
 * Gradients of `fn` at `inputs`, scaled by `dy`, computed from inside another backward pass (a
 * customGrad gradient function). Returns the output value too (the caller usually disposes it).
 *
 * [Note: nested tape]
 * tfjs 4.22 keeps one tape in `engine().state.activeTape`. Calling tf.grads while the outer
 * backward is running replaces that tape with a fresh one and sets it to null when done; the
 * outer backward then crashes when it cleans up its own tape (or leaks its saved tensors). The
 * fix is to save the outer tape and put it back around the inner call, which is what this does.
 */
export function nestedGradients(
  fn: (...inputs: tf.Tensor[]) => tf.Tensor,
  inputs: readonly tf.Tensor[],
  dy?: tf.Tensor,
): { value: tf.Tensor; gradients: tf.Tensor[] } {
  const state = tf.engine().state as unknown as EngineTapeState;
  const outerTape = state.activeTape;
  try {
    const { value, grads } = tf.engine().gradients(() => fn(...inputs), inputs as tf.Tensor[], dy, true);
    const gradients = grads.map((gradient, index) => gradient ?? tf.zerosLike(inputs[index]!));
    return { value, gradients };
  } finally {
    state.activeTape = outerTape;
  }
}
