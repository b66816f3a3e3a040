import * as tf from '@tensorflow/tfjs-core';
import { LayersError } from '../errors';

/**
 * The rows `indices` of a tensor (along axis 0), as tf.gather(tensor, indices) gives them.
 *
 * [Note: row copies on the cpu backend]
 * Every step each rank takes its slice of the global batch by row indices. tfjs-backend-cpu's
 * gather kernel computes every element's coordinates in JavaScript (indexToLoc per element): for
 * a 512 × 256 float32 slice about 12 ms against 0.3 ms for copying whole rows, several percent
 * of a compute-bound step. On cpu `dataSync()` returns the backend's own array (no copy), so the
 * rows are copied from it with TypedArray.set. Other backends (wasm copies the whole tensor out
 * of its heap on dataSync) and non-numeric dtypes keep tf.gather.
 * Indices are checked on every backend first (wasm's gather reads outside the tensor silently).
 */
export function gatherRows(tensor: tf.Tensor, indices: Int32Array): tf.Tensor {
  checkRowIndices(tensor, indices);
  if (
    tf.getBackend() !== 'cpu' ||
    tensor.dtype === 'string' ||
    tensor.dtype === 'complex64' ||
    tensor.rank === 0
  ) {
    return tf.tidy(() => tf.gather(tensor, tf.tensor1d(indices, 'int32')));
  }
  const source = tensor.dataSync() as Float32Array | Int32Array | Uint8Array;
  const rowSize = tensor.shape.slice(1).reduce((product, size) => product * size, 1);
  const Constructor = source.constructor as new (length: number) => typeof source;
  const rows = new Constructor(indices.length * rowSize);
  indices.forEach((row, index) => {
    rows.set(source.subarray(row * rowSize, (row + 1) * rowSize), index * rowSize);
  });
  return tf.tensor(rows, [indices.length, ...tensor.shape.slice(1)], tensor.dtype);
}

/** Every index names a row of `tensor` (axis 0), else a LayersError saying which and how to fix it. */
function checkRowIndices(tensor: tf.Tensor, indices: Int32Array): void {
  const rowCount = tensor.rank === 0 ? 0 : tensor.shape[0]!;
  const outside = indices.findIndex((row) => row < 0 || row >= rowCount);
  if (outside === -1) return;
  throw new LayersError(
    `Row ${indices[outside]} of a batch tensor of shape [${tensor.shape.join(', ')}] was asked for; it has ${rowCount} rows.`,
    {
      code: 'invalid-data',
      expected: `row indices in [0, ${rowCount})`,
      actual: indices[outside],
      fix: 'give every input and target tensor of a batch the same number of rows (axis 0): the trainer splits the batch by the rows of the first one.',
    },
  );
}
