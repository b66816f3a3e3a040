import * as tf from '@tensorflow/tfjs-core';
import type { LayersModel } from '@tensorflow/tfjs-layers';
import { LayersError } from '../errors';

export type LossOrMetricFunction = (yTrue: tf.Tensor, yPred: tf.Tensor) => tf.Tensor;

/** The loss and metrics of a compiled model (any number of outputs), with model.fit's log names. */
export interface CompiledObjective {
  /** ['loss', ...], as model.metricsNames (per-output losses, then metrics, for several outputs). */
  names: string[];
  /** The model's input and output names, in order (x and y given as name maps are read by them). */
  inputNames: string[];
  outputNames: string[];
  /**
   * model.fit's objective on one batch: the mean over samples of the summed per-output losses
   * (regularization not included), and the other logged values (names[1..]), each a scalar mean.
   */
  compute(
    targets: readonly tf.Tensor[],
    outputs: readonly tf.Tensor[],
  ): { loss: tf.Scalar; others: tf.Scalar[] };
}

/**
 * Reads the loss and metrics resolved by `model.compile` (tfjs-layers turns names like
 * 'categoricalCrossentropy' or 'accuracy' into functions and log names there), and computes them
 * as tfjs-layers' own train function does: the total loss is the mean of the per-sample sum of
 * every output's loss; with several outputs each output's mean loss is logged first.
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
  const outputCount = model.outputs.length;
  const metricsTensors = (model.metricsTensors ?? inner?.metricsTensors ?? []) as [
    LossOrMetricFunction,
    number,
  ][];
  return {
    names: [...(model.metricsNames ?? inner?.metricsNames ?? ['loss'])],
    inputNames: [...(model.inputNames ?? inner?.inputNames ?? [])],
    outputNames: [...(model.outputNames ?? inner?.outputNames ?? [])],
    compute(targets, outputs) {
      const perOutput = lossFunctions.map((lossFunction, index) =>
        lossFunction(targets[index]!, outputs[index]!),
      );
      const total = perOutput.reduce((sum, loss) => tf.add(sum, loss));
      const others = metricsTensors.map(([metric, outputIndex], index) =>
        outputCount > 1 && index < outputCount
          ? tf.mean(perOutput[index]!)
          : tf.mean(metric(targets[outputIndex]!, outputs[outputIndex]!)),
      );
      return { loss: tf.mean(total) as tf.Scalar, others: others as tf.Scalar[] };
    },
  };
}
