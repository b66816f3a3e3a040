import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { expect, it } from 'vitest';
import { backward, Linear, Module } from '../src/index';
import { backends } from './support/fixtures';

// The README's example, verbatim apart from collecting the losses.
it.each(backends)('the README example trains the Model for a few steps on %s', async (backend) => {
  await initBackend(backend);
  const losses: number[] = [];

  class Model extends Module {
    layer = this.registerModule('layer', new Linear(5, 5));
    forward(x: tf.Tensor) {
      return this.layer.forward(x);
    }
  }

  const model = new Model();
  const x = tf.randomNormal([32, 5], 0, 1, 'float32', 1);
  const y = tf.tidy(() => tf.reverse(x, 1)); // learn to reverse the features
  for (let step = 0; step < 20; step++) {
    const loss = backward(model, () => tf.losses.meanSquaredError(y, model.forward(x)));
    for (const parameter of model.parameters()) {
      const data = parameter.data.typedArray();
      const grad = parameter.grad!.typedArray();
      for (let index = 0; index < data.length; index++) data[index]! -= 0.1 * grad[index]!;
      parameter.grad!.fill(0);
    }
    losses.push(loss);
  }

  expect(losses.at(-1)!).toBeLessThan(0.5 * losses[0]!);
  tf.dispose([x, y]);
});
