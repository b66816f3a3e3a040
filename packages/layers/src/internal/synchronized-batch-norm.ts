import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import * as tf from '@tensorflow/tfjs-core';
import type * as tfl from '@tensorflow/tfjs-layers';
import { allReduceSum, allReduceSumInPlace } from './all-reduce-sum';
import { allLayers, batchNormalizationInternals, replaceCall } from './layer-access';

type CallFunction = (
  inputs: tf.Tensor | tf.Tensor[],
  kwargs: Record<string, unknown>,
) => tf.Tensor | tf.Tensor[];

/**
 * [Note: synchronized batch statistics]
 * In training mode a BatchNormalization layer normalizes with the mean and variance of its batch.
 * Each rank sees only its slice of the global batch, so local statistics would make W ranks
 * compute something else than model.fit on the global batch, and the moving statistics would
 * drift apart across ranks. While a ShardedTrainer trains, each BatchNormalization layer's `call`
 * is replaced on that instance (and restored afterwards) by one that computes the statistics of
 * the global batch: the per-channel sum is all-reduced for the mean, then the sum of squared
 * deviations for the (biased, as tfjs) variance, both differentiably (the backward all-reduces the
 * upstream gradients). The moving mean and variance are then updated from global statistics,
 * identically on every rank: non-trainable variables never need averaging. Inference (training
 * false) runs the original code untouched.
 */
export function synchronizeBatchNorm(model: tfl.LayersModel, group: ProcessGroup): () => void {
  const layers = allLayers(model).filter((layer) => layer.getClassName() === 'BatchNormalization');
  if (group.size === 1 || layers.length === 0) return () => {};
  const restores = layers.map((layer) =>
    replaceCall(
      layer,
      (original): CallFunction =>
        (inputs, kwargs) =>
          kwargs.training === true ? synchronizedCall(layer, group, inputs) : original(inputs, kwargs),
    ),
  );
  return () => {
    for (const restore of restores.reverse()) restore();
  };
}

function synchronizedCall(
  layer: tfl.layers.Layer,
  group: ProcessGroup,
  inputs: tf.Tensor | tf.Tensor[],
): tf.Tensor {
  const internals = batchNormalizationInternals(layer);
  return tf.tidy(() => {
    const input = Array.isArray(inputs) ? inputs[0]! : inputs;
    const rank = input.rank;
    const axis = internals.axis >= 0 ? internals.axis : internals.axis + rank;
    const reductionAxes = Array.from({ length: rank }, (_, index) => index).filter((index) => index !== axis);
    const broadcastShape = input.shape.map((size, index) => (index === axis ? size : 1));
    const count = allocateShared(Float32Array, 1);
    count[0] = reductionAxes.reduce((product, index) => product * input.shape[index]!, 1);
    allReduceSumInPlace(group, count);
    const mean = tf.div(allReduceSum(group, tf.sum(input, reductionAxes)), count[0]!);
    const centered = tf.sub(input, tf.reshape(mean, broadcastShape));
    const variance = tf.div(allReduceSum(group, tf.sum(tf.square(centered), reductionAxes)), count[0]!);
    // Channels last (the usual case): rank-1 statistics, as tfjs-layers' own training path passes
    // them to the same batchNorm kernel; otherwise broadcast shapes, as its broadcasting path does.
    const channelsLast = axis === rank - 1;
    const shaped = (tensor: tf.Tensor) => (channelsLast ? tensor : tf.reshape(tensor, broadcastShape));
    const normed = tf.batchNorm(
      input,
      shaped(mean),
      shaped(variance),
      internals.beta == null ? undefined : shaped(internals.beta.read()),
      internals.gamma == null ? undefined : shaped(internals.gamma.read()),
      internals.epsilon,
    );
    const decay = 1 - internals.momentum;
    for (const [variable, value] of [
      [internals.movingMean, mean],
      [internals.movingVariance, variance],
    ] as const) {
      const previous = variable.read();
      variable.write(tf.sub(previous, tf.mul(tf.sub(previous, value), decay)));
    }
    return normed;
  });
}
