import * as tf from '@tensorflow/tfjs-core';

interface HeapBackend {
  typedArrayFromHeap?: (info: tf.TensorInfo) => Float32Array | Int32Array;
}

/**
 * A tensor's values with no intermediate copy where the backend allows: on wasm a view of the
 * wasm heap (read it at once: anything that grows the heap detaches it), elsewhere `dataSync()`
 * (on cpu the tensor's own memory). Do not keep or write through the result.
 */
export function readTensorValues(tensor: tf.Tensor): Float32Array | Int32Array {
  const backend = tf.backend() as unknown as HeapBackend;
  if (tf.getBackend() === 'wasm' && typeof backend.typedArrayFromHeap === 'function') {
    return backend.typedArrayFromHeap(tensor);
  }
  return tensor.dataSync() as Float32Array | Int32Array;
}
