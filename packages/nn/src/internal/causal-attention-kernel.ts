import { nativeSgemm, type Sgemm } from '@fsdp-ts/tensor/internal';
import * as tf from '@tensorflow/tfjs-core';
import { NnError } from '../errors';
import {
  type ArrayKernel,
  runArrayKernel,
  runArrayKernelSavingSecondOutput,
  type WasmBackendLike,
} from './array-kernel';
import { backwardHeadBlas, forwardHeadBlas, headOutputBlas, headScoresBlas } from './causal-attention-blas';
import type { AttentionShape } from './head-layout';

/**
 * Causal attention on BLAS ([Note: attention on BLAS]) as two array kernels ([Note: array
 * kernels]): the forward reads qkv [B, T, 3·D] on the backend's memory and writes the output
 * [B, T, D] and the probabilities [B·H·T·T] (a second output saved for the backward, see [Note: saved
 * second outputs]); the backward reads dy, qkv and the probabilities and
 * writes dqkv. No read-back copies, no tf.tensor uploads.
 */
const FORWARD = 'FsdpCausalAttention';
const BACKWARD = 'FsdpCausalAttentionGrad';

function sgemmOrFail(): Sgemm {
  const sgemm = nativeSgemm();
  if (sgemm !== null) return sgemm;
  throw new NnError('causal attention: its array kernel ran while the BLAS matMul kernel was off.', {
    code: 'invalid-argument',
    expected: 'the BLAS matMul kernel active (setNativeMatMul(true)) from the forward to its backward',
    actual: 'setNativeMatMul(false) or another backend in between',
    fix: 'switch the matMul kernel between steps, not inside one.',
  });
}

function attentionShape(qkvShape: readonly number[], heads: number): AttentionShape {
  const [batch, time, threeD] = qkvShape as [number, number, number];
  return { batch, time, dModel: threeD / 3, heads, headSize: threeD / 3 / heads };
}

const forwardKernel: ArrayKernel = {
  name: FORWARD,
  inputs: ['qkv'],
  outputShapes: (shapes, attrs) => {
    const { batch, time, dModel, heads } = attentionShape(shapes[0]!, attrs.heads as number);
    return [[batch, time, dModel], [batch * heads * time * time]];
  },
  compute([qkv], [output, probabilities], shapes, attrs) {
    const shape = attentionShape(shapes[0]!, attrs.heads as number);
    const { batch, heads, time } = shape;
    if (output!.length === 0) return;
    const sgemm = sgemmOrFail();
    for (let b = 0; b < batch; b++) {
      for (let head = 0; head < heads; head++) {
        const slot = (b * heads + head) * time * time;
        const headProbabilities = probabilities!.subarray(slot, slot + time * time);
        forwardHeadBlas(sgemm, qkv as Float32Array, shape, b, head, headProbabilities, output!);
      }
    }
  },
  wasm: wasmForward,
};

/**
 * [Note: causal softmax by wasm's Softmax]
 * On wasm the forward writes every head's scores S = q·kᵀ/√h into one [B·H·T, T] tensor, sets the
 * entries above each diagonal to -∞, runs wasm's own (XNNPACK, vectorised) Softmax kernel function
 * over its rows on the heap (e^-∞ = 0: masked entries come out exactly 0, as P·v and the
 * backward need), then O = P·v per head. A JavaScript Math.exp per unmasked score (1 M per step
 * for the reference GPT at 8 × 128) made the causal softmax most of the forward's non-sgemm time.
 */
function wasmForward(
  backend: WasmBackendLike,
  [qkv]: readonly tf.TensorInfo[],
  attrs: tf.NamedAttrMap,
): tf.TensorInfo[] {
  const shape = attentionShape(qkv!.shape, attrs.heads as number);
  const { batch, heads, time, dModel } = shape;
  const output = backend.makeOutput([batch, time, dModel], 'float32');
  const scores = backend.makeOutput([batch * heads * time, time], 'float32');
  if (batch * heads * time * dModel === 0) return [output, scores];
  const sgemm = sgemmOrFail();
  {
    // [Note: array kernels]: views taken after the last allocation.
    const values = backend.typedArrayFromHeap(qkv!) as Float32Array;
    const all = backend.typedArrayFromHeap(scores) as Float32Array;
    for (let b = 0; b < batch; b++) {
      for (let head = 0; head < heads; head++) {
        const slot = (b * heads + head) * time * time;
        const headScores = all.subarray(slot, slot + time * time);
        headScoresBlas(sgemm, values, shape, b, head, headScores);
        for (let row = 0; row < time - 1; row++)
          headScores.fill(Number.NEGATIVE_INFINITY, row * time + row + 1, (row + 1) * time);
      }
    }
  }
  const softmax = tf.getKernel('Softmax', 'wasm')!.kernelFunc;
  const probabilities = softmax({
    inputs: { logits: scores },
    backend: backend as never,
    attrs: { dim: 1 },
  }) as tf.TensorInfo;
  backend.disposeData(scores.dataId);
  const values = backend.typedArrayFromHeap(qkv!) as Float32Array;
  const all = backend.typedArrayFromHeap(probabilities) as Float32Array;
  const out = backend.typedArrayFromHeap(output) as Float32Array;
  for (let b = 0; b < batch; b++) {
    for (let head = 0; head < heads; head++) {
      const slot = (b * heads + head) * time * time;
      headOutputBlas(sgemm, values, shape, b, head, all.subarray(slot, slot + time * time), out);
    }
  }
  return [output, probabilities];
}

const backwardKernel: ArrayKernel = {
  name: BACKWARD,
  inputs: ['dy', 'qkv', 'probabilities'],
  outputShapes: (shapes) => [[...shapes[1]!]],
  compute([dy, qkv, probabilities], [inputGradient], shapes, attrs) {
    const shape = attentionShape(shapes[1]!, attrs.heads as number);
    const { batch, heads, time } = shape;
    inputGradient!.fill(0);
    if (inputGradient!.length === 0) return;
    const sgemm = sgemmOrFail();
    const scratch = new Float32Array(time * time);
    for (let b = 0; b < batch; b++) {
      for (let head = 0; head < heads; head++) {
        const slot = (b * heads + head) * time * time;
        const headProbabilities = (probabilities as Float32Array).subarray(slot, slot + time * time);
        backwardHeadBlas(
          sgemm,
          qkv as Float32Array,
          dy as Float32Array,
          shape,
          b,
          head,
          headProbabilities,
          scratch,
          inputGradient!,
        );
      }
    }
  },
};

/** qkv [B, T, 3·D] float32 → causal attention [B, T, D], with BLAS on wasm or cpu. */
export function causalAttentionKernel(qkv: tf.Tensor, heads: number): tf.Tensor {
  // [Note: saved second outputs]: the probabilities are saved for the backward, not output.
  return runArrayKernelSavingSecondOutput(forwardKernel, { qkv }, { heads }, (dy, [input], probabilities) => {
    const [dQkv] = runArrayKernel(backwardKernel, null, { dy, qkv: input!, probabilities }, { heads });
    return [dQkv!];
  });
}
