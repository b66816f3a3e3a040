import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { describe, expect, it } from 'vitest';
import { LayersError } from '../src/errors';
import { gatherRows } from '../src/internal/gather-rows';

// The trainer's per-step row selection must equal tf.gather exactly (values, shape, dtype), on the
// cpu backend's row-copy path and on the tf.gather path of other backends.
describe.each(['cpu', 'wasm'] as const)('gatherRows on %s', (backend) => {
  const indices = Int32Array.from([4, 0, 4, 2, 1]);

  it('equals tf.gather for float32 images, int32 ids and bool masks', async () => {
    await initBackend(backend);
    const tensors = [
      tf.tensor4d(
        Float32Array.from({ length: 5 * 3 * 2 * 2 }, (_, index) => index * 0.5 - 7),
        [5, 3, 2, 2],
      ),
      tf.tensor2d(
        Int32Array.from({ length: 5 * 4 }, (_, index) => index * 3 - 11),
        [5, 4],
        'int32',
      ),
      tf.tensor1d([true, false, true, true, false], 'bool'),
    ];
    for (const tensor of tensors) {
      const expected = tf.gather(tensor, tf.tensor1d(indices, 'int32'));
      const actual = gatherRows(tensor, indices);
      expect(actual.shape).toEqual(expected.shape);
      expect(actual.dtype).toBe(expected.dtype);
      expect(Array.from(actual.dataSync())).toEqual(Array.from(expected.dataSync()));
    }
  });

  it('leaves the source tensor unchanged and returns its own memory', async () => {
    await initBackend(backend);
    const source = tf.tensor2d([1, 2, 3, 4, 5, 6], [3, 2]);
    const rows = gatherRows(source, Int32Array.from([2, 0]));
    rows.dispose();
    expect(Array.from(source.dataSync())).toEqual([1, 2, 3, 4, 5, 6]);
    const kept = gatherRows(source, Int32Array.from([1]));
    source.dispose();
    expect(Array.from(kept.dataSync())).toEqual([3, 4]);
  });

  it('a row outside the tensor fails with a LayersError naming the row, the rows there are and the fix', async () => {
    await initBackend(backend);
    const source = tf.tensor2d([1, 2, 3, 4, 5, 6], [3, 2]);
    for (const bad of [3, -1]) {
      let caught: unknown;
      try {
        gatherRows(source, Int32Array.from([0, bad, 1]));
      } catch (error) {
        caught = error;
      }
      expect(LayersError.isInstance(caught)).toBe(true);
      const error = caught as LayersError;
      expect(error.code).toBe('invalid-data');
      expect(error.expected).toBe('row indices in [0, 3)');
      expect(error.actual).toBe(bad);
      expect(error.message).toContain(`Row ${bad} of a batch tensor of shape [3, 2]`);
      expect(error.message).toContain('same number of rows');
    }
    source.dispose();
  });
});
