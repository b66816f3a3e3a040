import { isNativeMatMulActive } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { describe, expect, it } from 'vitest';
import { crossEntropy, crossEntropyWithOps } from '../src/functional/cross-entropy';
import { causalAttention } from '../src/internal/causal-attention';
import { causalAttentionReference } from '../src/internal/causal-attention-reference';
import { embeddingGatherKernel } from '../src/internal/embedding-gather-kernel';
import { linearKernel, linearWithMatMuls } from '../src/internal/linear-kernel';
import { gelu, geluTanhWithOps } from '../src/layers/gelu';
import { layerNorm, layerNormWithOps } from '../src/layers/layer-norm';
import { backendSettings, useBackend, worstRelativeError } from './support/fixtures';

/**
 * The array kernels ([Note: array kernels], [Note: linear as one kernel]) against the tfjs-op
 * forms they replace (forward and every input gradient, relative 1e-5 of each tensor's largest
 * value), and their gradients against central finite differences of the kernel's own forward.
 */
type Op = (inputs: tf.Tensor[]) => tf.Tensor;

interface Case {
  name: string;
  /** Float inputs (differentiated); `extra` are passed after them (int32 targets). */
  shapes: number[][];
  kernel: Op;
  oracle: Op;
  extra?: () => tf.Tensor[];
  /** Needs the BLAS kernel active (the Linear kernel runs only then). */
  needsBlas?: boolean;
}

function randomValues(size: number, seed: number): Float32Array {
  const values = new Float32Array(size);
  let state = seed * 2654435761;
  for (let index = 0; index < size; index++) {
    state = (Math.imul(state, 1103515245) + 12345) | 0;
    values[index] = ((state >>> 8) / 2 ** 24) * 2 - 1;
  }
  return values;
}

const targets = () => [tf.tensor([3, 0, 7, 7, 1, 5], [2, 3], 'int32')];
const cases: Case[] = [
  {
    name: 'layer norm [2, 3, 8]',
    shapes: [[2, 3, 8], [8], [8]],
    kernel: ([x, g, b]) => layerNorm(x!, g!, b!),
    oracle: ([x, g, b]) => layerNormWithOps(x!, g!, b!),
  },
  {
    name: 'tanh GELU [5, 7]',
    shapes: [[5, 7]],
    kernel: ([x]) => gelu(tf.mul(x!, 3)),
    oracle: ([x]) => geluTanhWithOps(tf.mul(x!, 3)),
  },
  {
    name: 'cross-entropy [2, 3, 8]',
    shapes: [[2, 3, 8]],
    kernel: ([logits, ids]) => crossEntropy(tf.mul(logits!, 4), ids!),
    oracle: ([logits, ids]) => crossEntropyWithOps(tf.mul(logits!, 4), ids!),
    extra: targets,
  },
  {
    // Wide logits: targets' probabilities down to e^-80 (the loss from p_argmax, not from p_target).
    name: 'cross-entropy [2, 3, 8], logits in ±40',
    shapes: [[2, 3, 8]],
    kernel: ([logits, ids]) => crossEntropy(tf.mul(logits!, 40), ids!),
    oracle: ([logits, ids]) => crossEntropyWithOps(tf.mul(logits!, 40), ids!),
    extra: targets,
  },
  {
    name: 'linear with bias [2, 3, 5] -> 4',
    shapes: [[2, 3, 5], [4, 5], [4]],
    kernel: ([x, w, b]) => linearKernel(x!, w!, b!),
    oracle: ([x, w, b]) => linearWithMatMuls(x!, w!, b!),
    needsBlas: true,
  },
  {
    name: 'linear without bias [6, 5] -> 3',
    shapes: [
      [6, 5],
      [3, 5],
    ],
    kernel: ([x, w]) => linearKernel(x!, w!, null),
    oracle: ([x, w]) => linearWithMatMuls(x!, w!, null),
    needsBlas: true,
  },
  {
    // Repeated ids: the gradient sums their rows. The oracle is tfjs's gather (its own gradient).
    name: 'embedding gather [7, 5] by 6 ids',
    shapes: [[7, 5]],
    kernel: ([weight, ids]) => embeddingGatherKernel(weight!, ids!),
    oracle: ([weight, ids]) => tf.gather(weight!, ids!),
    extra: () => [tf.tensor([3, 0, 6, 3, 3, 1], [6], 'int32')],
  },
  {
    name: 'causal attention [2, 4, 3·8], 2 heads',
    shapes: [[2, 4, 24]],
    kernel: ([qkv]) => causalAttention(tf.mul(qkv!, 2), 2),
    oracle: ([qkv]) => causalAttentionReference(tf.mul(qkv!, 2), 2),
    needsBlas: true,
  },
];

/** Sum of output · fixed weights, so every output element matters to the gradient. */
function weightedSum(output: tf.Tensor): tf.Scalar {
  return tf.sum(tf.mul(output, tf.tensor(randomValues(output.size, 99), output.shape)));
}

function gradientsOf(op: Op, inputs: tf.Tensor[], extra: tf.Tensor[]) {
  return tf.tidy(() => {
    const { value, grads } = tf.valueAndGrads((...xs: tf.Tensor[]) => weightedSum(op([...xs, ...extra])))(
      inputs,
    );
    return { value: value.dataSync()[0]!, grads: grads.map((grad) => grad.dataSync() as Float32Array) };
  });
}

function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, relative: number): void {
  const largest = Math.max(1e-6, ...Array.from(expected, Math.abs));
  const worst = worstRelativeError(actual, expected, relative, largest);
  expect(
    worst.ratio,
    `index ${worst.index}: ${actual[worst.index]} vs ${expected[worst.index]}`,
  ).toBeLessThanOrEqual(1);
}

describe.each(backendSettings)('array kernels on $backend, native matMul $native', ({ backend, native }) => {
  it.each(cases)('$name: forward and gradients match the tfjs-op form', async (testCase) => {
    await useBackend(backend, native);
    const inputs = testCase.shapes.map((shape, index) =>
      tf.tensor(
        randomValues(
          shape.reduce((a, b) => a * b, 1),
          index + 1,
        ),
        shape,
      ),
    );
    const extra = testCase.extra?.() ?? [];
    const before = tf.memory().numTensors;
    const kernel = gradientsOf(testCase.kernel, inputs, extra);
    const oracle = gradientsOf(testCase.oracle, inputs, extra);
    expect(tf.memory().numTensors).toBe(before);
    expect(Math.abs(kernel.value - oracle.value)).toBeLessThanOrEqual(
      1e-5 * Math.max(1, Math.abs(oracle.value)),
    );
    for (const [index, grad] of kernel.grads.entries()) expectClose(grad, oracle.grads[index]!, 1e-5);
    // The kernel really ran (not the op form): its name is on the profile.
    const profile = await tf.profile(() => testCase.kernel([...inputs, ...extra]));
    const ranKernel = profile.kernelNames.some((name) => name.startsWith('Fsdp'));
    expect(ranKernel).toBe(testCase.needsBlas === true ? isNativeMatMulActive() : true);
    tf.dispose([...inputs, ...extra, profile.result as tf.Tensor]);
  });

  it.each(cases)('$name: gradients match central finite differences', async (testCase) => {
    await useBackend(backend, native);
    const inputs = testCase.shapes.map((shape, index) =>
      tf.tensor(
        randomValues(
          shape.reduce((a, b) => a * b, 1),
          index + 11,
        ),
        shape,
      ),
    );
    const extra = testCase.extra?.() ?? [];
    const { grads } = gradientsOf(testCase.kernel, inputs, extra);
    const step = 1e-2;
    const lossAt = (which: number, element: number, delta: number) =>
      tf.tidy(() => {
        const values = inputs[which]!.dataSync().slice() as Float32Array;
        values[element]! += delta;
        const moved = inputs.map((input, index) =>
          index === which ? tf.tensor(values, input.shape) : input,
        );
        return weightedSum(testCase.kernel([...moved, ...extra])).dataSync()[0]!;
      });
    inputs.forEach((input, which) => {
      for (const element of [0, Math.floor(input.size / 2), input.size - 1]) {
        const numeric = (lossAt(which, element, step) - lossAt(which, element, -step)) / (2 * step);
        const analytic = grads[which]![element]!;
        expect(Math.abs(analytic - numeric), `input ${which} element ${element}`).toBeLessThanOrEqual(
          2e-3 + 1e-2 * Math.abs(numeric),
        );
      }
    });
    tf.dispose([...inputs, ...extra]);
  });
});

describe('embedding gather kernel input checks', () => {
  it('names an id outside the table and how to fix it', async () => {
    await useBackend('wasm', true);
    const weight = tf.zeros([4, 3]);
    const ids = tf.tensor([1, 4], [2], 'int32');
    expect(() => tf.tidy(() => embeddingGatherKernel(weight, ids))).toThrow(/id 4 at position 1 .*\[0, 4\)/);
    tf.dispose([weight, ids]);
  });
});

describe('cross-entropy kernel input checks', () => {
  it('names a target outside the vocabulary and how to fix it', async () => {
    await useBackend('wasm', true);
    const logits = tf.zeros([2, 4]);
    const ids = tf.tensor([1, 4], [2], 'int32');
    expect(() => tf.tidy(() => crossEntropy(logits, ids))).toThrow(/target 4 at row 1 .*\[0, 4\)/);
    tf.dispose([logits, ids]);
  });
});
