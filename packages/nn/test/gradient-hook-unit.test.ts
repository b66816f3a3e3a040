import { nestedGradients, type Parameter, TensorView, toTf } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type BackwardPlan,
  backward,
  backwardHook,
  crossEntropy,
  GPT,
  Module,
  type TransformerBlock,
  trainableParameters,
  withParameterTensors,
} from '../src/index';
import { backends, useBackend, worstRelativeError } from './support/fixtures';

/** Adds a gradient tensor into a Parameter's grad view (allocating it), as FSDP writes its flat grads. */
function addInto(parameter: Parameter, gradient: tf.Tensor): void {
  parameter.grad ??= TensorView.zeros(parameter.shape);
  const target = parameter.grad.typedArray() as Float32Array;
  const values = gradient.dataSync();
  for (let index = 0; index < values.length; index++) target[index]! += values[index]!;
}

/**
 * The shape of the FSDP runtime, in miniature: every TransformerBlock is a unit whose forward is a
 * customGrad that keeps only its input; the unit's gradient function re-runs the block's forward
 * under its own parameter tensors (withParameterTensors + nestedGradients), writes the block's
 * parameter gradients itself and returns the input gradient. The wrapper's [backwardHook] leaves
 * the other parameters to backward and passes a per-step anchor into every unit.
 */
class UnitWrapper extends Module {
  readonly events: string[] = [];
  private anchor: tf.Tensor | null = null;
  private readonly unitParameters = new Set<Parameter>();

  constructor(readonly model: GPT) {
    super();
    this.registerModule('model', model);
    for (const block of model.blocks) this.wrap(block);
  }

  [backwardHook](): BackwardPlan {
    this.anchor = tf.scalar(0);
    return {
      parameters: trainableParameters(this).filter((parameter) => !this.unitParameters.has(parameter)),
      extraInputs: [this.anchor],
      afterGradients: () => this.events.push('after'),
    };
  }

  forward(tokens: tf.Tensor): tf.Tensor {
    return this.model.forward(tokens);
  }

  private wrap(block: TransformerBlock): void {
    const parameters = block.parameters().filter((parameter) => parameter.requiresGrad);
    for (const parameter of parameters) this.unitParameters.add(parameter);
    const original = block.forward.bind(block);
    const unit = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
      const [input, , save] = args as [tf.Tensor, tf.Tensor, tf.GradSaveFunc];
      save([input]);
      return {
        value: original(input),
        gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
          this.events.push('unit');
          const tensors = parameters.map((parameter) => toTf(parameter.data));
          const recomputed = (x: tf.Tensor, ...weights: tf.Tensor[]) =>
            withParameterTensors(
              new Map(parameters.map((parameter, index) => [parameter, weights[index]!])),
              () => original(x),
            );
          const { value, gradients } = nestedGradients(recomputed, [saved[0]!, ...tensors], dy as tf.Tensor);
          parameters.forEach((parameter, index) => {
            addInto(parameter, gradients[index + 1]!);
          });
          tf.dispose([value, ...tensors, ...gradients.slice(1)]);
          return [gradients[0]!, tf.zeros([])];
        },
      };
    });
    block.forward = (x: tf.Tensor) => unit(x, this.anchor ?? tf.scalar(0));
  }
}

describe.each(backends)('a unit-style gradient hook on %s', (backend) => {
  beforeAll(() => useBackend(backend));

  it('re-running units under their own parameter tensors gives the default gradients', () => {
    const config = { vocabSize: 11, dModel: 16, nLayers: 2, nHeads: 2, seqLen: 8, seed: 3 };
    const reference = new GPT(config);
    const wrapped = new UnitWrapper(new GPT(config));
    const tokens = tf.tensor(
      Array.from({ length: 16 }, (_, index) => (index * 5) % 11),
      [2, 8],
      'int32',
    );
    const targets = tf.tensor(
      Array.from({ length: 16 }, (_, index) => (index * 3 + 1) % 11),
      [2, 8],
      'int32',
    );
    const referenceLoss = backward(reference, () => crossEntropy(reference.forward(tokens), targets));
    backward(wrapped, () => crossEntropy(wrapped.forward(tokens), targets)); // makes the step tensors
    for (const parameter of wrapped.parameters()) parameter.grad = null;
    wrapped.events.length = 0;
    const before = tf.memory().numTensors;
    const loss = backward(wrapped, () => crossEntropy(wrapped.forward(tokens), targets));
    expect(tf.memory().numTensors).toBe(before);
    expect(loss).toBeCloseTo(referenceLoss, 6);
    expect(wrapped.events).toEqual(['unit', 'unit', 'after']);
    const expected = new Map(reference.namedParameters());
    for (const [name, parameter] of wrapped.model.namedParameters()) {
      const error = worstRelativeError(
        parameter.grad!.toArray(),
        expected.get(name)!.grad!.toArray(),
        1e-5,
        1e-2,
      );
      expect(error.ratio, name).toBeLessThanOrEqual(1);
    }
    tf.dispose([tokens, targets]);
  });
});
