import { kernelBlockOf } from '@fsdp-ts/kernels';
import { AdamW } from '@fsdp-ts/optim';
import { type Parameter, TensorView } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { describe, expect, it } from 'vitest';
import { backward, crossEntropy, GPT } from '../src/index';
import { backends, useBackend } from './support/fixtures';

// dModel 128: every Linear weight and the embedding have at least 16,384 elements (blocks);
// biases and layer-norm parameters are smaller (ordinary memory).
const config = { vocabSize: 128, dModel: 128, nLayers: 1, nHeads: 4, seqLen: 8, seed: 3 };

function blockOf(view: TensorView | null) {
  return view === null ? null : kernelBlockOf(view.storage.array());
}

/** The same model with every Parameter's values copied into ordinary memory. */
function plainCopy(): GPT {
  const model = new GPT(config);
  for (const parameter of model.parameters()) {
    parameter.data = TensorView.fromArray(parameter.data.typedArray(), parameter.shape);
    expect(blockOf(parameter.data)).toBeNull();
  }
  return model;
}

function train(model: GPT, steps: number, setToNull: boolean): number[] {
  const optimizer = new AdamW(model.parameters(), { lr: 1e-2, weightDecay: 0.1 });
  const tokens = tf.tensor([[3, 1, 4, 1, 5, 9, 2, 6]], [1, 8], 'int32');
  const targets = tf.tensor([[1, 4, 1, 5, 9, 2, 6, 5]], [1, 8], 'int32');
  const losses: number[] = [];
  for (let step = 0; step < steps; step++) {
    losses.push(backward(model, () => crossEntropy(model.forward(tokens), targets)));
    optimizer.step();
    optimizer.zeroGrad({ setToNull });
  }
  tokens.dispose();
  targets.dispose();
  return losses;
}

const values = (parameters: Parameter[]) =>
  parameters.map((parameter) => Array.from(parameter.data.typedArray()));

describe.each(backends)('kernel blocks on %s ([Note: kernel blocks])', (backend) => {
  it("a GPT's large parameters live in blocks, with their first grad beside them", async () => {
    await useBackend(backend);
    const model = new GPT(config);
    const large = model.parameters().filter((parameter) => parameter.numel >= 16_384);
    const small = model.parameters().filter((parameter) => parameter.numel < 16_384);
    expect(large.length).toBeGreaterThanOrEqual(5);
    for (const parameter of large) expect(blockOf(parameter.data)).not.toBeNull();
    for (const parameter of small) expect(blockOf(parameter.data)).toBeNull();
    train(model, 1, false);
    for (const parameter of large) expect(blockOf(parameter.grad)).toBe(blockOf(parameter.data));
    for (const parameter of small) expect(blockOf(parameter.grad)).toBeNull();
  });

  for (const setToNull of [false, true]) {
    it(`AdamW over block parameters gives the bits of ordinary ones (zeroGrad setToNull ${setToNull})`, async () => {
      await useBackend(backend);
      const [inBlocks, plain] = [new GPT(config), plainCopy()];
      expect(values(inBlocks.parameters())).toEqual(values(plain.parameters()));
      const losses = train(inBlocks, 4, setToNull);
      expect(train(plain, 4, setToNull)).toEqual(losses);
      expect(losses[3]).toBeLessThan(losses[0]!);
      expect(values(inBlocks.parameters())).toEqual(values(plain.parameters()));
    });
  }
});
