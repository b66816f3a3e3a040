import {
  type BackendName,
  fromTf,
  initBackend,
  nestedGradients,
  recompute,
  setNativeMatMul,
  TensorView,
  toTf,
} from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finiteDifferenceGradients, initialValues, parameterShapes, tfLoss } from './reference-model';
import { trackTensors } from './support/fixtures';

// Each backend with the BLAS matMul kernel on (when a library loads) and off.
const settings: { backend: BackendName; native: boolean }[] = [
  { backend: 'cpu', native: true },
  { backend: 'cpu', native: false },
  { backend: 'wasm', native: true },
  { backend: 'wasm', native: false },
];

describe.each(settings)('bridge on $backend, native matMul $native', ({ backend, native }) => {
  beforeAll(async () => {
    expect(await initBackend(backend)).toBe(backend);
    await setNativeMatMul(native);
  });
  afterAll(async () => {
    await setNativeMatMul(true);
  });

  it('round-trips views through tfjs for every dtype, strided views included', () => {
    for (const dtype of ['float32', 'bfloat16', 'float16', 'int32', 'uint8'] as const) {
      const view = TensorView.fromArray([1, 2, 3, 4, 5, 6], [2, 3], dtype);
      const tensor = toTf(view.transpose(0, 1));
      expect(tensor.shape).toEqual([3, 2]);
      expect(Array.from(tensor.dataSync())).toEqual([1, 4, 2, 5, 3, 6]);
      const target = TensorView.zeros([2, 3], dtype).transpose(0, 1);
      fromTf(tensor, target);
      expect(target.toArray()).toEqual([1, 4, 2, 5, 3, 6]);
      tensor.dispose();
    }
    expect(() => fromTf(tf.zeros([2, 2]), TensorView.zeros([4]))).toThrow(
      /shape \[2, 2\] into a view of shape \[4\]/,
    );
  });

  it('computes gradients of an embedding/matMul/layer-norm/cross-entropy model matching float64 finite differences', () => {
    const values = initialValues();
    const expected = finiteDifferenceGradients(values);
    const names = Object.keys(parameterShapes);
    const leaks = trackTensors();
    const tensors = names.map((name) => toTf(TensorView.fromArray(values[name]!, parameterShapes[name]!)));
    const gradients = tf.grads((...inputs: tf.Tensor[]) =>
      tfLoss(...(inputs as [tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor])),
    )(tensors);
    names.forEach((name, index) => {
      const actual = gradients[index]!.dataSync();
      const reference = expected[name]!;
      let scale = 0;
      for (const value of reference) scale = Math.max(scale, Math.abs(value));
      for (let element = 0; element < reference.length; element++) {
        // float32 tfjs against float64 finite differences: 1e-4 of the largest gradient of the tensor.
        expect(Math.abs(actual[element]! - reference[element]!), `${name}[${element}]`).toBeLessThanOrEqual(
          1e-4 * scale + 1e-6,
        );
      }
    });
    tf.dispose([...tensors, ...gradients]);
    leaks.expectNoneLeft();
  });

  it('recompute gives the gradients of plain autograd and leaks no tensors', () => {
    const x = tf.randomNormal([6, 5], 0, 1, 'float32', 1);
    const weight = tf.randomNormal([5, 5], 0, 1, 'float32', 2);
    const block = (input: tf.Tensor, w: tf.Tensor) => tf.tanh(tf.add(tf.matMul(input, w), input));
    const loss = (f: typeof block) => (input: tf.Tensor, w: tf.Tensor) =>
      tf.sum(tf.square(f(f(input, w), w)));
    const leaks = trackTensors();
    const plain = tf.grads(loss(block))([x, weight]);
    const checkpointed = tf.grads(loss(recompute(block)))([x, weight]);
    for (let index = 0; index < 2; index++) {
      const a = plain[index]!.dataSync();
      const b = checkpointed[index]!.dataSync();
      for (let element = 0; element < a.length; element++) expect(b[element]).toBeCloseTo(a[element]!, 5);
    }
    tf.dispose([...plain, ...checkpointed]);
    leaks.expectNoneLeft();
    tf.dispose([x, weight]);
  });

  it('nestedGradients inside a customGrad keeps the outer tape intact', () => {
    const leaks = trackTensors();
    const inner = (value: tf.Tensor) => tf.sum(tf.mul(value, value));
    const outer = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
      const input = args[0] as tf.Tensor;
      (args[1] as tf.GradSaveFunc)([input]);
      return {
        value: tf.mul(input, 3),
        gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
          const { value, gradients } = nestedGradients(inner, saved);
          value.dispose();
          return [tf.mul(dy as tf.Tensor, gradients[0]!)]; // deliberately not 3: proves this path ran
        },
      };
    });
    const x = tf.tensor1d([1, 2, 3]);
    const [gradient] = tf.grads((input: tf.Tensor) => tf.sum(tf.mul(outer(input), 2)))([x]);
    expect(Array.from(gradient!.dataSync())).toEqual([4, 8, 12]); // 2 * d(sum x^2)/dx
    tf.dispose([x, gradient!]);
    leaks.expectNoneLeft();
  });
});

describe('zero copy on cpu', () => {
  beforeAll(async () => {
    await initBackend('cpu');
  });

  it('a tensor from a float32 view aliases the storage: mutating the view shows in the tensor', () => {
    const view = TensorView.zeros([2, 3], 'float32', { shared: true }).narrow(0, 1, 1);
    const tensor = toTf(view);
    view.fill(7);
    expect(Array.from(tensor.dataSync())).toEqual([7, 7, 7]);
    tensor.dispose();
  });
});

describe('backend ladder', () => {
  const saved = process.env.FSDP_BACKEND;
  afterAll(() => {
    if (saved === undefined) delete process.env.FSDP_BACKEND;
    else process.env.FSDP_BACKEND = saved;
  });

  it('lands on wasm when the optional native backends are absent', async () => {
    delete process.env.FSDP_BACKEND;
    expect(await initBackend()).toBe('wasm');
    expect(tf.getBackend()).toBe('wasm');
  });

  it('honours FSDP_BACKEND and rejects unknown values', async () => {
    process.env.FSDP_BACKEND = 'cpu';
    expect(await initBackend()).toBe('cpu');
    process.env.FSDP_BACKEND = 'gpu';
    await expect(initBackend()).rejects.toThrow(/FSDP_BACKEND=gpu is not a backend/);
  });

  it('forcing an absent backend says how to install it', async () => {
    await expect(initBackend('tfjs-node')).rejects.toThrow(/npm install @tensorflow\/tfjs-node@4.22.0/);
  });
});
