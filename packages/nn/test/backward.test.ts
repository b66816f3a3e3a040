import { Parameter, TensorView } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type BackwardPlan,
  backward,
  backwardHook,
  crossEntropy,
  GPT,
  Linear,
  Module,
  NnError,
  parameterTensor,
  releaseStepTensors,
  withParameterTensors,
} from '../src/index';
import { backends, useBackend, worstRelativeError } from './support/fixtures';

const small = { vocabSize: 7, dModel: 8, nLayers: 1, nHeads: 2, seqLen: 4 };

function batch() {
  return {
    tokens: tf.tensor([0, 1, 2, 3, 4, 5, 6, 0], [2, 4], 'int32'),
    targets: tf.tensor([1, 2, 3, 4, 5, 6, 0, 1], [2, 4], 'int32'),
  };
}

/**
 * y = x · weightᵀ through a customGrad whose gradient function computes the weight gradient itself
 * and records it (as FSDP's unit gradient function does), returning only the input gradient and
 * a zero gradient for the per-step anchor.
 */
class SelfGradientLinear extends Module {
  readonly weight = this.registerParameter('weight', Parameter.fromArray([1, -2, 0.5, 3, 0.25, -1], [2, 3]));
  recorded: number[] | null = null;
  events: string[] = [];
  useAnchor = true;
  private anchor: tf.Tensor | null = null;

  [backwardHook](): BackwardPlan {
    this.anchor = tf.scalar(0);
    this.events.push('plan');
    return {
      parameters: [],
      extraInputs: this.useAnchor ? [this.anchor] : [],
      afterGradients: () => this.events.push('after'),
      onError: () => this.events.push('error'),
    };
  }

  forward(x: tf.Tensor): tf.Tensor {
    const weight = tf.tidy(() => tf.transpose(parameterTensor(this.weight)));
    const anchor = this.anchor ?? tf.scalar(0);
    const unit = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
      const [input, , save] = args as [tf.Tensor, tf.Tensor, tf.GradSaveFunc];
      save([input, weight]); // tensors the gradient function uses must be saved (the forward tidy frees the rest)
      return {
        value: tf.matMul(input, weight),
        gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
          const [savedInput, savedWeight] = saved as [tf.Tensor, tf.Tensor];
          const weightGradient = tf.transpose(tf.matMul(tf.transpose(savedInput), dy as tf.Tensor));
          this.recorded = Array.from(weightGradient.dataSync());
          return [tf.matMul(dy as tf.Tensor, tf.transpose(savedWeight)), tf.zeros([])];
        },
      };
    });
    return unit(x, anchor);
  }
}

describe.each(backends)('backward on %s', (backend) => {
  beforeAll(() => useBackend(backend));

  it('accumulates into grad, allocating it on first use, and frees every tensor', () => {
    const model = new GPT(small);
    const { tokens, targets } = batch();
    const before = tf.memory().numTensors;
    const loss = backward(model, () => crossEntropy(model.forward(tokens), targets));
    // Only the step tensors stay, one per Parameter on wasm ([Note: step tensors]).
    const kept = backend === 'wasm' ? model.parameters().length : 0;
    expect(tf.memory().numTensors).toBe(before + kept);
    releaseStepTensors(model.parameters());
    expect(tf.memory().numTensors).toBe(before);
    expect(loss).toBeGreaterThan(1);
    const first = model.parameters().map((parameter) => parameter.grad!.toArray());
    const grad = model.blocks.at(0).mlp.inputProjection.weight.grad;
    expect(grad!.shape).toEqual([32, 8]);
    expect(backward(model, () => crossEntropy(model.forward(tokens), targets))).toBeCloseTo(loss, 6);
    expect(model.blocks.at(0).mlp.inputProjection.weight.grad).toBe(grad); // same view, accumulated in place
    model.parameters().forEach((parameter, index) => {
      const doubled = first[index]!.map((value) => 2 * value);
      expect(worstRelativeError(parameter.grad!.toArray(), doubled, 1e-5, 1e-3).ratio).toBeLessThanOrEqual(1);
    });
    tf.dispose([tokens, targets]);
  });

  it('gives frozen parameters no gradient and leaves the others unchanged', () => {
    const reference = new GPT(small);
    const frozen = new GPT(small);
    for (const parameter of frozen.blocks.at(0).mlp.parameters()) parameter.requiresGrad = false;
    const { tokens, targets } = batch();
    backward(reference, () => crossEntropy(reference.forward(tokens), targets));
    backward(frozen, () => crossEntropy(frozen.forward(tokens), targets));
    const referenceGrads = new Map(reference.namedParameters().map(([name, p]) => [name, p.grad!.toArray()]));
    for (const [name, parameter] of frozen.namedParameters()) {
      if (name.includes('.mlp.')) expect(parameter.grad, name).toBeNull();
      else expect(parameter.grad!.toArray(), name).toEqual(referenceGrads.get(name));
    }
    tf.dispose([tokens, targets]);
  });

  it('gives tied embeddings the sum of the embedding and lm head gradients', () => {
    const tied = new GPT({ ...small, tieEmbeddings: true, seed: 5 });
    const untied = new GPT({ ...small, tieEmbeddings: false, seed: 5 });
    untied.lmHead.weight.data.copyFrom(untied.tokenEmbedding.weight.data);
    expect(untied.tokenEmbedding.weight.data.toArray()).toEqual(tied.tokenEmbedding.weight.data.toArray());
    const { tokens, targets } = batch();
    const tiedLoss = backward(tied, () => crossEntropy(tied.forward(tokens), targets));
    const untiedLoss = backward(untied, () => crossEntropy(untied.forward(tokens), targets));
    expect(tiedLoss).toBeCloseTo(untiedLoss, 6);
    const embedding = untied.tokenEmbedding.weight.grad!.toArray();
    const head = untied.lmHead.weight.grad!.toArray();
    const sum = embedding.map((value, index) => value + head[index]!);
    const error = worstRelativeError(tied.tokenEmbedding.weight.grad!.toArray(), sum, 1e-5, 1e-3);
    expect(error.ratio).toBeLessThanOrEqual(1);
    expect(head.some((value) => value !== 0) && embedding.some((value) => value !== 0)).toBe(true);
    tf.dispose([tokens, targets]);
  });

  it('lets a module take over through [backwardHook]: extra inputs make its gradient function run', () => {
    const input = tf.tensor([0.5, -1, 2, 1, 0, -0.5], [2, 3]); // a constant, not a parameter
    const target = [
      [1, 0],
      [0, 1],
    ];
    const lossOf = (output: tf.Tensor) => tf.sum(tf.mul(output, tf.tensor(target)));
    const plain = new Linear(3, 2, { bias: false });
    plain.weight.data.copyFrom(TensorView.fromArray([1, -2, 0.5, 3, 0.25, -1], [2, 3]));
    backward(plain, () => lossOf(plain.forward(input)));

    const custom = new SelfGradientLinear();
    const before = tf.memory().numTensors;
    const loss = backward(custom, () => lossOf(custom.forward(input)));
    expect(tf.memory().numTensors).toBe(before);
    expect(custom.events).toEqual(['plan', 'after']);
    expect(custom.weight.grad).toBeNull(); // the default path stayed out of it
    expect(custom.recorded).not.toBeNull();
    expect(
      worstRelativeError(custom.recorded!, plain.weight.grad!.toArray(), 1e-6, 1e-3).ratio,
    ).toBeLessThanOrEqual(1);
    expect(loss).toBeCloseTo(
      tf.tidy(() => lossOf(plain.forward(input)).dataSync()[0]!),
      5,
    );

    expect(() =>
      backward(custom, () => {
        throw new Error('bad input');
      }),
    ).toThrow('bad input');
    expect(custom.events).toEqual(['plan', 'after', 'plan', 'error']);
    expect(tf.memory().numTensors).toBe(before);

    // Without the anchor nothing differentiable leads to the unit, and tfjs never calls its gradient.
    const unanchored = new SelfGradientLinear();
    unanchored.useAnchor = false;
    backward(unanchored, () => lossOf(unanchored.forward(input)));
    expect(unanchored.recorded).toBeNull();
    input.dispose();
  });

  it('leaves no tensor behind when the forward throws, and the next step works', () => {
    const model = new GPT(small);
    const { tokens, targets } = batch();
    const tooLong = tf.zeros([1, 9], 'int32');
    backward(model, () => crossEntropy(model.forward(tokens), targets)); // makes the step tensors
    const before = tf.memory().numTensors;
    expect(() => backward(model, () => crossEntropy(model.forward(tooLong), targets))).toThrow(NnError);
    expect(() =>
      backward(model, () => {
        const logits = model.forward(tokens);
        throw new Error(`failed after a forward of ${logits.shape}`);
      }),
    ).toThrow('failed after');
    expect(tf.memory().numTensors).toBe(before);
    expect(backward(model, () => crossEntropy(model.forward(tokens), targets))).toBeGreaterThan(0);
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([tokens, targets, tooLong]);
  });

  it('rejects a non-scalar loss and a sharded parameter with errors that say how to fix them', () => {
    const linear = new Linear(2, 2);
    const x = tf.ones([1, 2]);
    expect(() => backward(linear, () => linear.forward(x))).toThrow(/scalar/);
    linear.bias!.data = linear.bias!.data.narrow(0, 0, 1);
    expect(() => backward(linear, () => tf.sum(linear.forward(x)))).toThrow(/sharded/);
    x.dispose();
  });

  it('differentiates against the values data holds now, whoever wrote them and however', () => {
    // [Note: step tensors]: the kept tensor is refilled on every backward, so no writer has to
    // announce its write. Each way of changing a Parameter between two backwards must show in the
    // second loss and gradients exactly as a fresh model holding those values gives them.
    const model = new GPT({ ...small, seed: 1 });
    const { tokens, targets } = batch();
    const step = () => {
      for (const parameter of model.parameters()) parameter.grad = null;
      const loss = backward(model, () => crossEntropy(model.forward(tokens), targets));
      return { loss, grads: model.parameters().map((parameter) => parameter.grad!.toArray()) };
    };
    const fresh = () => {
      const copy = new GPT({ ...small, seed: 1 });
      copy.loadStateDict(model.stateDict());
      const loss = backward(copy, () => crossEntropy(copy.forward(tokens), targets));
      releaseStepTensors(copy.parameters());
      return { loss, grads: copy.parameters().map((parameter) => parameter.grad!.toArray()) };
    };
    step();
    const weight = model.parameters()[1]!;
    const writes: [string, () => void][] = [
      // A raw write through the typed array, as an optimizer kernel or a collective does.
      ['typed array', () => ((weight.data.typedArray() as Float32Array)[0]! += 0.5)],
      [
        'copyFrom',
        () =>
          weight.data.copyFrom(
            TensorView.fromArray(
              weight.data.toArray().map((v) => v * 0.5),
              [...weight.shape],
            ),
          ),
      ],
      [
        're-pointed data',
        () =>
          (weight.data = TensorView.fromArray(
            weight.data.toArray().map((v) => -v),
            [...weight.shape],
          )),
      ],
      ['loadStateDict', () => model.loadStateDict(new GPT({ ...small, seed: 2 }).stateDict())],
    ];
    for (const [how, write] of writes) {
      const earlier = step();
      write();
      const now = step();
      const expected = fresh();
      expect(now.loss, how).not.toBe(earlier.loss);
      expect(now.loss, how).toBe(expected.loss);
      expect(now.grads, how).toEqual(expected.grads);
    }
    releaseStepTensors(model.parameters());
    tf.dispose([tokens, targets]);
  });

  it('parameterTensor looks up the innermost scope, else reads data', () => {
    const parameter = Parameter.fromArray([1, 2], [2]);
    const outer = new Map([[parameter, tf.tensor([3, 4])]]);
    const inner = new Map([[parameter, tf.tensor([5, 6])]]);
    const read = () => Array.from(tf.tidy(() => tf.clone(parameterTensor(parameter))).dataSync());
    expect(read()).toEqual([1, 2]);
    expect(withParameterTensors(outer, read)).toEqual([3, 4]);
    expect(withParameterTensors(outer, () => withParameterTensors(inner, read))).toEqual([5, 6]);
    tf.dispose([...outer.values(), ...inner.values()]);
  });
});
