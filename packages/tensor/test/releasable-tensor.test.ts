import { initBackend, ReleasableTensor, TensorView } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { tfjsBackends, trackTensors } from './support/fixtures';

interface BackendReads {
  readSync(dataId: tf.DataId): ArrayLike<number>;
  refCount(dataId: tf.DataId): number;
}

const backendReads = () => tf.backend() as unknown as BackendReads;

describe.each(tfjsBackends)('ReleasableTensor on %s', (backend) => {
  beforeAll(async () => {
    expect(await initBackend(backend)).toBe(backend);
  });

  it('tf.clone shares the dataId (the tape saves tensors that share the parameter memory)', () => {
    const source = tf.tensor([1, 2, 3]);
    const clone = tf.clone(source);
    expect(clone.dataId).toBe(source.dataId);
    source.dispose();
    expect(Array.from(clone.dataSync())).toEqual([1, 2, 3]);
    clone.dispose();
  });

  it('a tensor released after forward and restored before backward feeds the saved clones: gradients use the restored values', () => {
    const x = [
      [1, -2, 0.5],
      [0.25, 3, -1],
    ];
    const w = [
      [0.5, -1, 2, 0],
      [1, 0.25, -0.5, 3],
      [-2, 1, 0, 0.75],
    ];
    const doubled = w.map((row) => row.map((value) => 2 * value));
    const leaks = trackTensors();
    const weight = new ReleasableTensor(TensorView.fromArray(w.flat(), [3, 4]));
    const readsAfterRelease: number[] = [];
    // A pre-backward hook: tfjs runs it before the gradients of everything computed before it.
    const restoreBeforeBackward = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => ({
      value: tf.clone(args[0] as tf.Tensor),
      gradFunc: (dy: tf.Tensor | tf.Tensor[]) => {
        // Restore other values than the forward saw: the gradient must follow them.
        weight.restore(TensorView.fromArray(doubled.flat(), [3, 4]));
        return dy as tf.Tensor;
      },
    }));
    const input = tf.tensor(x);
    const [gradient] = tf.grads((xs: tf.Tensor) => {
      const product = restoreBeforeBackward(tf.matMul(xs, weight.tensor));
      weight.release();
      readsAfterRelease.push(backendReads().readSync(weight.tensor.dataId).length);
      expect(weight.state).toBe('released');
      return tf.sum(tf.square(product));
    })([input]);
    expect(readsAfterRelease).toEqual([0]);
    expect(weight.state).toBe('resident');
    // dx = 2 (x · w) · (2w)ᵀ: the forward product with w, the backward with the restored 2w.
    const y = x.map((row) =>
      w[0]!.map((_, column) => row.reduce((sum, value, k) => sum + value * w[k]![column]!, 0)),
    );
    const expected = y.map((row) =>
      doubled.map((wRow) => wRow.reduce((sum, value, column) => sum + 2 * row[column]! * value, 0)),
    );
    const actual = gradient!.arraySync() as number[][];
    expected.flat().forEach((value, index) => {
      expect(actual.flat()[index]!).toBeCloseTo(value, 4);
    });
    tf.dispose([gradient!, input, weight.tensor]);
    leaks.expectNoneLeft();
  });

  it('disposing every holder while released leaves nothing behind; restore then does nothing', () => {
    const leaks = trackTensors();
    const weight = new ReleasableTensor(TensorView.fromArray([1, 2, 3, 4], [2, 2]));
    const held = tf.clone(weight.tensor);
    const references = backendReads().refCount(weight.tensor.dataId);
    weight.release();
    expect(backendReads().refCount(weight.tensor.dataId)).toBe(references);
    expect(leaks.added()).toBe(2);
    held.dispose();
    weight.tensor.dispose();
    leaks.expectNoneLeft();
    expect(weight.state).toBe('gone');
    weight.restore(TensorView.fromArray([5, 6, 7, 8], [2, 2]));
    expect(weight.state).toBe('gone');
  });

  it('restore checks the state and the shape', () => {
    const weight = new ReleasableTensor(TensorView.fromArray([1, 2], [2]));
    expect(() => weight.restore(TensorView.fromArray([1, 2], [2]))).toThrow(/resident/);
    weight.release();
    expect(() => weight.restore(TensorView.fromArray([1, 2, 3], [3]))).toThrow(
      /shape \[3\] for a tensor of shape \[2\]/,
    );
    weight.restore(TensorView.fromArray([7, 8], [2]));
    expect(Array.from(weight.tensor.dataSync())).toEqual([7, 8]);
    weight.tensor.dispose();
  });
});

describe('ReleasableTensor frees memory', () => {
  it('on wasm, a released 32 MiB tensor lets the next 32 MiB allocation reuse the heap (no growth)', async () => {
    await initBackend('wasm');
    const heap = () => (tf.backend() as unknown as { wasm: { HEAPU8: Uint8Array } }).wasm.HEAPU8.length;
    const numel = 8 * 1024 * 1024;
    const first = new ReleasableTensor(TensorView.zeros([numel]));
    const grown = heap();
    first.release();
    const second = tf.zeros([numel]);
    expect(heap()).toBe(grown);
    second.dispose();
    first.tensor.dispose();
  });
});
