import type * as tf from '@tensorflow/tfjs-core';
import type { LayersModel } from '@tensorflow/tfjs-layers';
import { LayersError } from '../errors';

export type LossOrMetricFunction = (yTrue: tf.Tensor, yPred: tf.Tensor) => tf.Tensor;

/** The loss and metrics of a compiled single-output model, with their log names (model.fit's). */
export interface CompiledObjective {
  loss: LossOrMetricFunction;
  metrics: LossOrMetricFunction[];
  /** ['loss', ...metric names], as model.metricsNames. */
  names: string[];
}

/**
 * Reads the loss and metrics resolved by `model.compile` (tfjs-layers turns names like
 * 'categoricalCrossentropy' or 'accuracy' into functions and log names there).
 */
export function compiledObjective(model: LayersModel): CompiledObjective {
  // A Sequential keeps its compiled state on the LayersModel it wraps (`model.model`).
  const inner = (model as unknown as { model?: LayersModel }).model;
  const lossFunctions = (model.lossFunctions ?? inner?.lossFunctions) as LossOrMetricFunction[] | undefined;
  if (lossFunctions === undefined || lossFunctions.length === 0) {
    throw new LayersError('The model has no loss: it was not compiled and no `loss` option was given.', {
      code: 'not-compiled',
      expected:
        'model.compile({ optimizer, loss, metrics }) before new ShardedTrainer(model, ...), or the loss option',
      actual: 'no loss functions',
      fix: "keep your model.compile call (its optimizer is not used), or pass { loss: 'meanSquaredError', metrics: [...] } to ShardedTrainer.",
    });
  }
  if (model.outputs.length !== 1 || model.inputs.length !== 1) {
    throw new LayersError(
      `ShardedTrainer trains models with one input and one output; this one has ${model.inputs.length} inputs and ${model.outputs.length} outputs.`,
      {
        code: 'unsupported-model',
        expected: '1 input, 1 output',
        actual: { inputs: model.inputs.length, outputs: model.outputs.length },
        fix: 'train a single-input, single-output model (concatenate inputs or heads into one tensor), or use @fsdp-ts/fsdp.',
      },
    );
  }
  return {
    loss: lossFunctions[0]!,
    metrics: model.metricsTensors.map(([metric]) => metric as LossOrMetricFunction),
    names: [...model.metricsNames],
  };
}
