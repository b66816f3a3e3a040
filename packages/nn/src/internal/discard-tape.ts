import * as tf from '@tensorflow/tfjs-core';

interface TapeNode {
  saved?: tf.Tensor[];
}

interface EngineGradientState {
  activeTape: TapeNode[] | null;
  gradientDepth: number;
}

/**
 * [Note: tape after an error]
 * When the function given to `engine().gradients` throws, tfjs 4.22 leaves the recorded tape in
 * `engine().state.activeTape`, and the tensors saved for backward on it are never freed (they
 * were kept out of the forward tidy). After a failed outermost backward this frees them and
 * clears the tape, so `tf.memory().numTensors` is the same as before the failed step.
 */
export function discardTapeAfterError(): void {
  const state = tf.engine().state as unknown as EngineGradientState;
  if (state.gradientDepth !== 0 || state.activeTape === null) return;
  for (const node of state.activeTape) for (const tensor of node.saved ?? []) tensor.dispose();
  state.activeTape = null;
}
