import * as tf from '@tensorflow/tfjs-core';
import type * as tfl from '@tensorflow/tfjs-layers';
import { backingVariable, replaceCall, swapVariableValue } from './layer-access';
import { tap } from './tap';
import type { WeightBucket } from './weight-bucket';

type Call = (inputs: tf.Tensor | tf.Tensor[], kwargs: Record<string, unknown>) => tf.Tensor | tf.Tensor[];

/** One layer owning trainable weights, and the bucket holding exactly those weights. */
export interface LayerUnit {
  readonly layer: tfl.layers.Layer;
  readonly bucket: WeightBucket;
}

/**
 * [Note: full-shard layers]
 * Under 'full-shard' each layer with trainable weights has its own bucket, of which a rank keeps
 * only its shard. While a ShardedTrainer fits, each such layer's `call` is replaced on that
 * instance (restored afterwards, like the synchronized batch norm) by one that:
 * 1. gathers the layer's weights (all-gather into the full buffer, put back under the variables'
 *    released dataIds: ReleasableTensor.restore);
 * 2. in a training step, makes each weight's LayerVariable read a *tap* for the duration of the
 *    call: the variable's value in forward (sharing its dataId), whose gradient function receives
 *    the weight's whole gradient (tfjs has summed every use by then) and adds it to the bucket's
 *    full gradient. The taps take the step's *anchor* (a scalar variable, the only thing the step
 *    differentiates) as a second input, so tfjs runs them although the weights are constants to it;
 * 3. runs the original `call`, then releases the weights (frees the full buffer and the backend
 *    memory behind the variables; the tape's saved copies share those dataIds);
 * 4. wraps each output in an identity whose gradient function runs before any of the layer's own
 *    (tfjs walks the tape in reverse): it gathers and restores the weights again for the backward.
 * When every tap of a call has fired, the layer's backward is over: the weights are released and,
 * once every call of the step is done, the full gradient is reduce-scattered into the shard and
 * freed. Every rank runs the same layers in the same order, so the blocking collectives inside
 * forward and backward match up. At most one layer is gathered at a time (no prefetch).
 * Outside a training step (validation, evaluate) the replacement only gathers and releases.
 * The weights the tape saves are restored before they are read, never copied: no recompute.
 */
export class FullShardLayers {
  /** The step's anchor: differentiated instead of the (released) weights. */
  readonly anchor: tf.Variable;
  private training = false;
  private readonly calls = new Map<WeightBucket, number>();

  constructor(readonly units: readonly LayerUnit[]) {
    // The initial value is a separate tensor sharing the variable's data: tidy frees it.
    this.anchor = tf.tidy(() => tf.variable(tf.scalar(0), true));
  }

  /** Replaces the layers' `call` (see the note); returns the function restoring them. */
  install(): () => void {
    const restores = this.units.map((unit) =>
      replaceCall(unit.layer, (original) => (inputs, kwargs) => this.call(unit, original, inputs, kwargs)),
    );
    return () => {
      for (const restore of restores.reverse()) restore();
    };
  }

  /** A training step starts: taps and backward hooks are attached from now on. */
  beginStep(): void {
    this.training = true;
    this.calls.clear();
  }

  /**
   * After the backward: any layer whose taps did not all fire (a weight without a gradient, or a
   * layer off the loss's path) is reduced with what arrived (zeros otherwise) and released, in
   * model order on every rank.
   */
  endStep(): void {
    this.training = false;
    for (const unit of this.units) {
      const running = this.calls.get(unit.bucket);
      // Not called this step (zero gradient), or a backward that did not reach every weight.
      if (running === undefined || running > 0) unit.bucket.reduceGradients();
      unit.bucket.release();
    }
    this.calls.clear();
  }

  dispose(): void {
    this.anchor.dispose();
  }

  private call(
    unit: LayerUnit,
    original: Call,
    inputs: tf.Tensor | tf.Tensor[],
    kwargs: Record<string, unknown>,
  ): tf.Tensor | tf.Tensor[] {
    const { bucket } = unit;
    bucket.gather();
    if (!this.training) {
      try {
        return original(inputs, kwargs);
      } finally {
        bucket.release();
      }
    }
    this.calls.set(bucket, (this.calls.get(bucket) ?? 0) + 1);
    let waiting = bucket.variables.length;
    const onGradient = (index: number, gradient: tf.Tensor): void => {
      bucket.addGradient(index, gradient);
      waiting--;
      if (waiting > 0) return;
      bucket.release();
      const remaining = (this.calls.get(bucket) ?? 1) - 1;
      this.calls.set(bucket, remaining);
      if (remaining === 0) bucket.reduceGradients();
    };
    const restores = bucket.variables.map((variable, index) =>
      swapVariableValue(
        variable,
        tap(backingVariable(variable), this.anchor, (gradient) => onGradient(index, gradient)),
      ),
    );
    let output: tf.Tensor | tf.Tensor[];
    try {
      output = original(inputs, kwargs);
    } finally {
      for (const restore of restores) restore();
      bucket.release();
    }
    const hook = (tensor: tf.Tensor) => beforeBackward(tensor, this.anchor, () => bucket.gather());
    return Array.isArray(output) ? output.map(hook) : hook(output);
  }
}

/** `output` in forward; `hook()` runs before the gradient of anything that produced it (note, 4). */
function beforeBackward(output: tf.Tensor, anchor: tf.Tensor, hook: () => void): tf.Tensor {
  const op = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const anchorInput = args[1] as tf.Tensor;
    return {
      value: tf.clone(args[0] as tf.Tensor),
      gradFunc: (dy: tf.Tensor | tf.Tensor[]) => {
        hook();
        return [dy as tf.Tensor, tf.zerosLike(anchorInput)];
      },
    };
  });
  return op(output, anchor);
}
