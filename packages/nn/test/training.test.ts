import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { backward, crossEntropy, Generator, GPT } from '../src/index';
import { backends, InlineAdamW, useBackend } from './support/fixtures';

describe.each(backends)('training on %s', (backend) => {
  beforeAll(() => useBackend(backend));

  it('50 AdamW steps keep tf.memory().numTensors constant and learn to count', () => {
    // Task: x_t = (start + t) mod V, predict x_{t+1}; a fresh random batch every step.
    const config = { vocabSize: 8, dModel: 16, nLayers: 2, nHeads: 2, seqLen: 8, seed: 0 };
    const model = new GPT(config);
    const optimizer = new InlineAdamW(model.parameters(), { lr: 1e-2, weightDecay: 0 });
    const generator = new Generator(7);
    const batch = 8;
    const losses: number[] = [];
    const tensorCounts: number[] = [];
    for (let step = 0; step < 50; step++) {
      const inputs: number[] = [];
      const targets: number[] = [];
      for (let row = 0; row < batch; row++) {
        const start = Math.floor(generator.uniform() * config.vocabSize);
        for (let t = 0; t < config.seqLen; t++) {
          inputs.push((start + t) % config.vocabSize);
          targets.push((start + t + 1) % config.vocabSize);
        }
      }
      const x = tf.tensor(inputs, [batch, config.seqLen], 'int32');
      const y = tf.tensor(targets, [batch, config.seqLen], 'int32');
      optimizer.zeroGrad();
      losses.push(backward(model, () => crossEntropy(model.forward(x), y)));
      optimizer.update();
      tf.dispose([x, y]);
      tensorCounts.push(tf.memory().numTensors);
    }
    expect(new Set(tensorCounts).size).toBe(1);
    const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
    expect(mean(losses.slice(0, 5))).toBeGreaterThan(1.5); // ~ln 8 = 2.08 at init
    expect(mean(losses.slice(-5))).toBeLessThan(0.5);
  });
});
