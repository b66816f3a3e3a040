import { Parameter } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  backward,
  crossEntropy,
  Dropout,
  Embedding,
  erf,
  Generator,
  GPT,
  gelu,
  Linear,
  Module,
} from '../src/index';
import { causalAttention } from '../src/internal/causal-attention';
import { causalAttentionReference } from '../src/internal/causal-attention-reference';
import { backends, useBackend, worstRelativeError } from './support/fixtures';
import { NoisyScale } from './support/noisy-scale';

/** erf by its Maclaurin series in float64 (exact to ~1e-15 for |x| <= 4): the independent reference. */
function referenceErf(x: number): number {
  let term = x;
  let sum = x;
  for (let n = 1; n < 200; n++) {
    term *= (-x * x) / n;
    sum += term / (2 * n + 1);
  }
  return (2 / Math.sqrt(Math.PI)) * sum;
}

const grid = Array.from({ length: 161 }, (_, index) => -4 + index * 0.05);

function valueAndGradient(fn: (x: tf.Tensor) => tf.Tensor, values: number[]) {
  return tf.tidy(() => {
    const x = tf.tensor(values);
    const { value, grad } = tf.valueAndGrad((input: tf.Tensor) => tf.sum(fn(input)))(x);
    const output = Array.from(tf.tidy(() => fn(x)).dataSync());
    value.dispose();
    return { output, gradient: Array.from(grad.dataSync()) };
  });
}

describe.each(backends)('layers on %s', (backend) => {
  beforeAll(() => useBackend(backend));

  it('erf (Abramowitz-Stegun 7.1.26) is within 2e-7 of the series', () => {
    const values = tf.tidy(() => Array.from(erf(tf.tensor(grid)).dataSync()));
    const worst = Math.max(...values.map((value, index) => Math.abs(value - referenceErf(grid[index]!))));
    expect(worst).toBeLessThan(2e-7 + 1e-7); // approximation error + float32 rounding
  });

  // Tolerance |ours - reference| <= 1e-5 · max(|reference|, 0.1): erf's absolute error (1.5e-7)
  // times |x| <= 4 dominates near Φ(x) ≈ 0.
  it('GELU (exact and tanh) and their gradients match float64 formulas', () => {
    const phi = (x: number) => 0.5 * (1 + referenceErf(x / Math.SQRT2));
    const density = (x: number) => Math.exp(-0.5 * x * x) / Math.sqrt(2 * Math.PI);
    const exact = valueAndGradient((x) => gelu(x, 'none'), grid);
    expect(
      worstRelativeError(
        exact.output,
        grid.map((x) => x * phi(x)),
        1e-5,
        0.1,
      ).ratio,
    ).toBeLessThanOrEqual(1);
    const exactGradient = grid.map((x) => phi(x) + x * density(x));
    expect(worstRelativeError(exact.gradient, exactGradient, 1e-5, 0.1).ratio).toBeLessThanOrEqual(1);

    const c = Math.sqrt(2 / Math.PI);
    const tanhForm = (x: number) => 0.5 * x * (1 + Math.tanh(c * (x + 0.044715 * x ** 3)));
    const tanhGradient = (x: number) => (tanhForm(x + 1e-6) - tanhForm(x - 1e-6)) / 2e-6;
    const approximate = valueAndGradient((x) => gelu(x, 'tanh'), grid);
    expect(worstRelativeError(approximate.output, grid.map(tanhForm), 1e-5, 0.1).ratio).toBeLessThanOrEqual(
      1,
    );
    expect(
      worstRelativeError(approximate.gradient, grid.map(tanhGradient), 1e-5, 0.1).ratio,
    ).toBeLessThanOrEqual(1);
  });

  it('crossEntropy is the mean negative log-likelihood, stable for huge logits, for [N, V] and [B, T, V]', () => {
    const logits = [2, -1, 0.5, 1000, 999, -1000, 0, 0, 0, -3, 4, 1];
    const targets = [0, 1, 2, 1];
    const reference =
      targets.reduce((sum, target, row) => {
        const rowValues = logits.slice(row * 3, row * 3 + 3);
        const max = Math.max(...rowValues);
        const logSum = max + Math.log(rowValues.reduce((total, value) => total + Math.exp(value - max), 0));
        return sum + logSum - rowValues[target]!;
      }, 0) / targets.length;
    for (const shape of [
      [4, 3],
      [2, 2, 3],
    ]) {
      const loss = tf.tidy(
        () =>
          crossEntropy(
            tf.tensor(logits, shape),
            tf.tensor(targets, shape.slice(0, -1), 'int32'),
          ).dataSync()[0]!,
      );
      expect(Math.abs(loss - reference)).toBeLessThan(1e-5 * reference);
    }
    const gradient = tf.tidy(() =>
      Array.from(
        tf
          .grad((input: tf.Tensor) => crossEntropy(input, tf.tensor(targets, [4], 'int32')))(
            tf.tensor(logits, [4, 3]),
          )
          .dataSync(),
      ),
    );
    expect(gradient.every(Number.isFinite)).toBe(true);
    expect(gradient[3]! + gradient[4]! + gradient[5]!).toBeCloseTo(0, 6); // rows of softmax - onehot sum to 0
  });

  it('Dropout is seeded, scales kept values by 1/(1-rate), and is the identity in eval mode', () => {
    const x = tf.ones([4000]);
    const first = new Dropout(0.25, { seed: 3 });
    const same = new Dropout(0.25, { seed: 3 });
    const other = new Dropout(0.25, { seed: 4 });
    const run = (layer: Dropout) => tf.tidy(() => Array.from(layer.forward(x).dataSync()));
    const values = run(first);
    expect(values).toEqual(run(same));
    expect(values).not.toEqual(run(other));
    expect(new Set(values.map((value) => value.toFixed(5)))).toEqual(new Set(['0.00000', '1.33333']));
    const dropped = values.filter((value) => value === 0).length / values.length;
    expect(dropped).toBeGreaterThan(0.22);
    expect(dropped).toBeLessThan(0.28);
    first.eval();
    expect(first.forward(x)).toBe(x);
    x.dispose();
  });

  it('a GPT with dropout is seeded in training mode and deterministic in eval mode', () => {
    const config = { vocabSize: 7, dModel: 8, nLayers: 1, nHeads: 2, seqLen: 4, dropout: 0.2, seed: 4 };
    const tokens = tf.tensor([[1, 2, 3, 4]], [1, 4], 'int32');
    const logits = (model: GPT) => tf.tidy(() => Array.from(model.forward(tokens).dataSync()));
    const first = new GPT(config);
    const second = new GPT(config);
    const trained = logits(first);
    expect(logits(second)).toEqual(trained); // same seed, same masks
    expect(logits(first)).not.toEqual(trained); // the next masks differ
    first.eval();
    second.eval();
    const evaluated = logits(first);
    expect(logits(first)).toEqual(evaluated);
    expect(logits(second)).toEqual(evaluated);
    expect(evaluated).not.toEqual(trained);
    tokens.dispose();
  });

  it('Linear without bias, and Embedding, have the expected shapes and values', () => {
    const linear = new Linear(3, 2, { bias: false, generator: new Generator(1) });
    expect(linear.namedParameters().map(([name]) => name)).toEqual(['weight']);
    const embedding = new Embedding(5, 3, { generator: new Generator(1) });
    tf.tidy(() => {
      const rows = embedding.forward(tf.tensor([[4, 0]], [1, 2], 'int32'));
      expect(rows.shape).toEqual([1, 2, 3]);
      const table = embedding.weight.data.toArray();
      expect(Array.from(rows.dataSync())).toEqual(
        [...table.slice(12, 15), ...table.slice(0, 3)].map(Math.fround),
      );
      const output = linear.forward(tf.ones([2, 4, 3]));
      expect(output.shape).toEqual([2, 4, 2]);
      const weight = linear.weight.data.toArray();
      expect(output.dataSync()[1]).toBeCloseTo(weight[3]! + weight[4]! + weight[5]!, 6);
    });
  });

  it('the attention kernel matches batched tfjs attention in value and gradient', () => {
    const generator = new Generator(9);
    const [batch, time, dModel, heads] = [2, 5, 8, 2];
    const values = Array.from({ length: batch * time * 3 * dModel }, () => generator.normal());
    const weights = Array.from({ length: batch * time * dModel }, () => generator.normal());
    const evaluate = (attend: (qkv: tf.Tensor, heads: number) => tf.Tensor) =>
      tf.tidy(() => {
        const qkv = tf.tensor(values, [batch, time, 3 * dModel]);
        const weight = tf.tensor(weights, [batch, time, dModel]);
        const loss = (input: tf.Tensor) => tf.sum(tf.mul(attend(input, heads), weight));
        const output = Array.from(attend(qkv, heads).dataSync());
        return { output, gradient: Array.from(tf.grad(loss)(qkv).dataSync()) };
      });
    const fast = evaluate(causalAttention);
    const reference = evaluate(causalAttentionReference);
    expect(worstRelativeError(fast.output, reference.output, 1e-5, 1e-2).ratio).toBeLessThanOrEqual(1);
    expect(worstRelativeError(fast.gradient, reference.gradient, 1e-5, 1e-2).ratio).toBeLessThanOrEqual(1);
  });

  it('NoisyScale (test-only layer): d sum(y) / d scale is the column sums of x, d / d x is scale; noise is additive', () => {
    const layer = new NoisyScale(3, { seed: 5, std: 0.5 });
    const scale = layer.scale.data.toArray();
    const input = Parameter.fromArray([1, 2, 3, 4, 5, 6], [2, 3]);
    class Probe extends Module {
      readonly noisy = this.registerModule('noisy', layer);
      readonly input = this.registerParameter('input', input);
      forward(): tf.Tensor {
        return this.noisy.forward(this.tensor(this.input));
      }
    }
    const probe = new Probe();
    backward(probe, () => tf.sum(probe.forward()));
    expect(layer.scale.grad!.toArray().map((value) => Math.round(value * 1e5) / 1e5)).toEqual([5, 7, 9]);
    const expectedInputGrad = [...scale, ...scale];
    input.grad!.toArray().forEach((value, index) => {
      expect(value).toBeCloseTo(expectedInputGrad[index]!, 6);
    });
  });
});

describe('Linear with an input of the wrong width', () => {
  it('names the layer, the width given and the width expected', async () => {
    await useBackend('cpu');
    const layer = new Linear(8, 8);
    const input = tf.ones([6, 7]);
    expect(() => layer.forward(input)).toThrow(
      /^Linear\(8 → 8\): the input's last dimension is 7, expected 8 \(input shape \[6, 7\]\)\. Fix: .*Linear\(7, 8\)/,
    );
    input.dispose();
  });
});
