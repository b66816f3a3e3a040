import * as tf from '@tensorflow/tfjs-core';
import { convertContiguous } from '../dtype/convert';
import { formatShape, TensorError } from '../errors';
import { shapesEqual } from '../shape';
import type { TensorView } from '../tensor-view';
import { readTensorValues } from './read-tensor-values';

/**
 * A tf.Tensor of the view's shape and values. The caller owns it (dispose it, or create it inside
 * tf.tidy).
 *
 * [Note: zero-copy bridge]
 * float32 and int32 contiguous views are handed to tfjs as the typed array over the storage
 * itself. The cpu backend keeps that array as the tensor's memory (zero copy: writes to the view
 * show in the tensor, shown by a test); wasm and tfjs-node copy once into their own memory.
 * bfloat16/float16 views are widened to float32 (one conversion), uint8 to int32, and strided
 * views are made contiguous first (one copy).
 */
export function toTf(view: TensorView): tf.Tensor {
  const { values, dtype } = tfjsValues(view);
  return tf.tensor(values, [...view.shape], dtype);
}

/** The values tfjs is handed for a view (see [Note: zero-copy bridge]) and their tfjs dtype. */
export function tfjsValues(view: TensorView): {
  values: Float32Array | Int32Array;
  dtype: 'float32' | 'int32';
} {
  const contiguous = view.contiguous();
  switch (view.dtype) {
    case 'float32':
      return { values: contiguous.typedArray() as Float32Array, dtype: 'float32' };
    case 'int32':
      return { values: contiguous.typedArray() as Int32Array, dtype: 'int32' };
    case 'uint8':
      return { values: Int32Array.from(contiguous.typedArray()), dtype: 'int32' };
    case 'bfloat16':
    case 'float16': {
      const widened = new Float32Array(view.numel);
      convertContiguous(contiguous.typedArray(), view.dtype, widened, 'float32');
      return { values: widened, dtype: 'float32' };
    }
  }
}

/** Writes the tensor's values into `into` (same shape), converting to the view's dtype. */
export function fromTf(tensor: tf.Tensor, into: TensorView): TensorView {
  if (!shapesEqual(tensor.shape, into.shape)) {
    throw new TensorError(
      `fromTf: tensor of shape ${formatShape(tensor.shape)} into a view of shape ${formatShape(into.shape)}.`,
      {
        code: 'shape-mismatch',
        expected: into.shape,
        actual: tensor.shape,
        fix: 'reshape the tensor (tf.reshape) or the view (view.view) so the shapes agree.',
      },
    );
  }
  const values = readTensorValues(tensor);
  const sourceDType = tensor.dtype === 'int32' ? 'int32' : 'float32';
  if (into.isContiguous) {
    convertContiguous(values, sourceDType, into.typedArray(), into.dtype);
    return into;
  }
  const staging = into.contiguous();
  convertContiguous(values, sourceDType, staging.typedArray(), into.dtype);
  into.copyFrom(staging);
  return into;
}
