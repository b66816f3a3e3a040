import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import * as tf from '@tensorflow/tfjs-core';

/** Sums `values` over the ranks in place (blocking). */
export function allReduceSumInPlace(group: ProcessGroup, values: Float32Array): void {
  if (group.size > 1) group.allReduce(values, { op: 'sum' }).wait();
}

function allReduceTensor(group: ProcessGroup, tensor: tf.Tensor): tf.Tensor {
  const values = allocateShared(Float32Array, tensor.size);
  values.set(tensor.dataSync() as Float32Array);
  allReduceSumInPlace(group, values);
  return tf.tensor(values, tensor.shape, 'float32');
}

/**
 * A differentiable all-reduce: forward, every rank gets the sum of every rank's `tensor`;
 * backward, the gradient of the sum with respect to this rank's input is the sum of the upstream
 * gradients of every rank (the total loss is the sum of the ranks' losses). Both directions block
 * until all ranks arrive, so every rank must reach it in the same order (the same model and the
 * same layers in every process).
 */
export function allReduceSum(group: ProcessGroup, tensor: tf.Tensor): tf.Tensor {
  const op = tf.customGrad((...inputs: (tf.Tensor | tf.GradSaveFunc)[]) => ({
    value: allReduceTensor(group, inputs[0] as tf.Tensor),
    gradFunc: (dy: tf.Tensor) => allReduceTensor(group, dy),
  }));
  return op(tensor);
}
