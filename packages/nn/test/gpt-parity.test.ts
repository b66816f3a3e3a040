import { readFileSync } from 'node:fs';
import { TensorView } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backward, crossEntropy, GPT, type StateDict } from '../src/index';
import { backendSettings, useBackend, worstRelativeError } from './support/fixtures';

interface FixtureCase {
  tieEmbeddings: boolean;
  tokens: number[];
  targets: number[];
  parameters: Record<string, { shape: number[]; values: number[] }>;
  logits: number[];
  loss: number;
  gradients: Record<string, number[]>;
}

interface Fixture {
  config: { vocabSize: number; dModel: number; nLayers: number; nHeads: number; seqLen: number };
  batch: number;
  cases: FixtureCase[];
}

// Produced by fixtures/make-gpt-fixture.py (PyTorch 1.13, float64).
const fixture = JSON.parse(
  readFileSync(new URL('./fixtures/gpt-small.json', import.meta.url), 'utf8'),
) as Fixture;

// Tolerance: elementwise |ours - torch| <= 1e-4 · max(|torch|, 1e-2), ours in float32.
const RELATIVE = 1e-4;
const FLOOR = 1e-2;

describe.each(backendSettings)(
  'GPT parity with PyTorch on $backend, native matMul $native',
  ({ backend, native }) => {
    beforeAll(() => useBackend(backend, native));
    afterAll(() => useBackend(backend, true));

    for (const testCase of fixture.cases) {
      it(`matches logits, loss and every gradient (tieEmbeddings ${testCase.tieEmbeddings})`, () => {
        const { config, batch } = fixture;
        const model = new GPT({ ...config, tieEmbeddings: testCase.tieEmbeddings });
        const dict: StateDict = {};
        for (const [name, { shape, values }] of Object.entries(testCase.parameters)) {
          dict[name] = TensorView.fromArray(values, shape);
        }
        model.loadStateDict(dict);
        expect(model.namedParameters().map(([name]) => name)).toEqual(Object.keys(testCase.parameters));

        const tokens = tf.tensor(testCase.tokens, [batch, config.seqLen], 'int32');
        const targets = tf.tensor(testCase.targets, [batch, config.seqLen], 'int32');
        const logits = tf.tidy(() => model.forward(tokens));
        const logitsError = worstRelativeError(logits.dataSync(), testCase.logits, RELATIVE, FLOOR);
        expect(logits.shape).toEqual([batch, config.seqLen, config.vocabSize]);
        logits.dispose();
        expect(logitsError.ratio).toBeLessThanOrEqual(1);

        const loss = backward(model, () => crossEntropy(model.forward(tokens), targets));
        expect(Math.abs(loss - testCase.loss)).toBeLessThanOrEqual(RELATIVE * testCase.loss);
        for (const [name, parameter] of model.namedParameters()) {
          const expected = testCase.gradients[name]!;
          const error = worstRelativeError(parameter.grad!.toArray(), expected, RELATIVE, FLOOR);
          expect(error.ratio, `${name}: worst at index ${error.index}`).toBeLessThanOrEqual(1);
        }
        tokens.dispose();
        targets.dispose();
      });
    }
  },
);
