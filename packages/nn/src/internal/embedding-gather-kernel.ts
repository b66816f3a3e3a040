import * as tf from '@tensorflow/tfjs-core';
import { NnError } from '../errors';
import { type ArrayKernel, arrayKernelsRun, runArrayKernel } from './array-kernel';

/**
 * [Note: embedding gather as one kernel]
 * Embedding rows by id as one array kernel (see [Note: array kernels]): weight [count, D] float32,
 * ids [n] int32 → rows [n, D], each row one block copy. tfjs-backend-wasm's GatherV2 took 14 ms
 * per call for the reference GPT's 1024 ids × 256 columns (a per-element index computation),
 * 5% of the 8 × 128 step; PyTorch's embedding is a row copy too. The gradient is
 * UnsortedSegmentSum(dy, ids, count) (tensor's bridge runs it in place on the wasm heap), as
 * tfjs's own gather gradient. An id outside [0, count) is an NnError.
 */
const FORWARD = 'FsdpEmbeddingGather';

function checkId(id: number, count: number, index: number): void {
  if (id >= 0 && id < count) return;
  throw new NnError(`Embedding: id ${id} at position ${index} is not a row of the table [0, ${count}).`, {
    code: 'invalid-argument',
    expected: `ids in [0, ${count})`,
    actual: id,
    fix: 'check the ids against the embedding count (vocabulary size, or seqLen for positions).',
  });
}

const forwardKernel: ArrayKernel = {
  name: FORWARD,
  inputs: ['weight', 'ids'],
  outputShapes: (shapes) => [[shapes[1]![0]!, shapes[0]![1]!]],
  compute([weightValues, idValues], [rows], shapes) {
    const weight = weightValues as Float32Array;
    const ids = idValues as Int32Array;
    const [count, width] = shapes[0] as [number, number];
    const output = rows!;
    for (let index = 0; index < ids.length; index++) {
      const id = ids[index]!;
      checkId(id, count, index);
      output.set(weight.subarray(id * width, id * width + width), index * width);
    }
  },
};

const gradient: tf.GradConfig = {
  kernelName: FORWARD,
  inputsToSave: ['weight', 'ids'],
  gradFunc: (dy, saved) => {
    const [weight, ids] = saved as [tf.Tensor, tf.Tensor];
    return {
      weight: () => tf.unsortedSegmentSum(dy as tf.Tensor, ids as tf.Tensor1D, weight.shape[0]!),
      ids: () => tf.zerosLike(ids),
    };
  },
};

/** True when `embeddingGatherKernel` runs: wasm or cpu, float32 weight, int32 ids. */
export function embeddingGatherKernelRuns(weight: tf.Tensor, ids: tf.Tensor): boolean {
  return arrayKernelsRun() && weight.dtype === 'float32' && ids.dtype === 'int32' && weight.rank === 2;
}

/** weight [count, D], ids [n] int32 → weight's rows [n, D] (one kernel; see the Note above). */
export function embeddingGatherKernel(weight: tf.Tensor, ids: tf.Tensor): tf.Tensor {
  return runArrayKernel(forwardKernel, gradient, { weight, ids })[0]!;
}
