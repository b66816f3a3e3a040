import { nativeSgemm } from '@fsdp-ts/tensor/internal';
import * as tf from '@tensorflow/tfjs-core';
import { arrayKernelsRun } from './array-kernel';
import { backwardHeadBlas, forwardHeadBlas } from './causal-attention-blas';
import { causalAttentionKernel } from './causal-attention-kernel';
import { causalSoftmaxGradientRows, causalSoftmaxRows } from './causal-softmax';
import { type AttentionShape, gatherHead, scatterHead, transposeSquare } from './head-layout';

/**
 * Causal multi-head attention from the fused projection qkv [B, T, 3·D] (q, k, v concatenated on
 * the last dim, each split into `heads` contiguous heads of size D / heads) → [B, T, D].
 *
 * [Note: attention kernel]
 * One customGrad. The forward and the backward are written per (batch, head) pair with plain 2-D
 * matMuls only: on wasm (tfjs 4.22) a batched matMul runs ~10x slower than the same work as 2-D
 * matMuls, and slicing a head out of a tensor costs ~1 ms per slice, so heads are gathered with
 * typed-array loops from one read of qkv and the small [T, T] softmax runs in JavaScript (float64,
 * only over the causal part j ≤ i). Per head:
 *   forward:  S = (q·s)·kᵀ,  P = softmax_causal(S),  O = P·v            (s = 1/√headSize)
 *   backward: dv = Pᵀ·dO,  dP = dO·vᵀ,  dS = P ⊙ (dP - rowsum(dP ⊙ P)),  dq = dS·k·s,  dk = dSᵀ·(q·s)
 * The probabilities P stay in JavaScript memory between forward and backward (B·H·T·T floats).
 * causal-attention-reference.ts is the same math in batched tfjs ops, used as a test oracle.
 * With the BLAS matMul kernel active, each head is five sgemm calls instead: [Note: attention on BLAS].
 */
export function causalAttention(qkv: tf.Tensor, heads: number): tf.Tensor {
  const [batch, time, threeD] = qkv.shape as [number, number, number];
  const shape: AttentionShape = { batch, time, dModel: threeD / 3, heads, headSize: threeD / 3 / heads };
  const sgemm = nativeSgemm();
  // With BLAS on wasm or cpu: one kernel each way, on the backend's memory.
  if (sgemm !== null && arrayKernelsRun() && qkv.dtype === 'float32')
    return causalAttentionKernel(qkv, heads);
  const kernel = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const input = args[0] as tf.Tensor;
    const values = (input.dataSync() as Float32Array).slice();
    const probabilities = new Float32Array(batch * heads * time * time);
    const output = new Float32Array(batch * time * shape.dModel);
    for (let b = 0; b < batch; b++) {
      for (let head = 0; head < heads; head++) {
        const slot = (b * heads + head) * time * time;
        const headProbabilities = probabilities.subarray(slot, slot + time * time);
        if (sgemm === null) forwardHead(values, shape, b, head, headProbabilities, output);
        else forwardHeadBlas(sgemm, values, shape, b, head, headProbabilities, output);
      }
    }
    return {
      value: tf.tensor(output, [batch, time, shape.dModel], 'float32'),
      gradFunc: (dy: tf.Tensor | tf.Tensor[]) => {
        const gradient = (dy as tf.Tensor).dataSync() as Float32Array;
        const inputGradient = new Float32Array(values.length);
        const scratch = sgemm === null ? null : new Float32Array(time * time);
        for (let b = 0; b < batch; b++) {
          for (let head = 0; head < heads; head++) {
            const slot = (b * heads + head) * time * time;
            const headProbabilities = probabilities.subarray(slot, slot + time * time);
            if (sgemm === null || scratch === null)
              backwardHead(values, gradient, shape, b, head, headProbabilities, inputGradient);
            else
              backwardHeadBlas(
                sgemm,
                values,
                gradient,
                shape,
                b,
                head,
                headProbabilities,
                scratch,
                inputGradient,
              );
          }
        }
        return [tf.tensor(inputGradient, input.shape, 'float32')];
      },
    };
  });
  return kernel(qkv);
}

function forwardHead(
  values: Float32Array,
  shape: AttentionShape,
  b: number,
  head: number,
  probabilities: Float32Array,
  output: Float32Array,
): void {
  const { time, headSize } = shape;
  const scale = 1 / Math.sqrt(headSize);
  const query = tf.tensor(gatherHead(values, shape, b, head, 0, scale, false), [time, headSize]);
  const keyTransposed = tf.tensor(gatherHead(values, shape, b, head, 1, 1, true), [headSize, time]);
  const scores = tf.matMul(query, keyTransposed);
  const scoreValues = scores.dataSync() as Float32Array;
  causalSoftmaxRows(scoreValues, probabilities, time);
  const value = tf.tensor(gatherHead(values, shape, b, head, 2, 1, false), [time, headSize]);
  // [Note: arrays handed to tf.tensor] the cpu backend keeps the array itself as the tensor's
  // memory (no copy), so every array given to tf.tensor here is never written afterwards.
  const probabilityTensor = tf.tensor(probabilities, [time, time]);
  const mixed = tf.matMul(probabilityTensor, value);
  scatterHead(mixed.dataSync() as Float32Array, shape, b, head, 0, 1, output, shape.dModel);
  tf.dispose([query, keyTransposed, scores, value, probabilityTensor, mixed]);
}

function backwardHead(
  values: Float32Array,
  gradient: Float32Array,
  shape: AttentionShape,
  b: number,
  head: number,
  probabilities: Float32Array,
  inputGradient: Float32Array,
): void {
  const { time, headSize, dModel } = shape;
  const scale = 1 / Math.sqrt(headSize);
  const outputGradient = tf.tensor(gatherHead(gradient, shape, b, head, 0, 1, false, dModel), [
    time,
    headSize,
  ]);
  const valueTransposed = tf.tensor(gatherHead(values, shape, b, head, 2, 1, true), [headSize, time]);
  const probabilityGradient = tf.matMul(outputGradient, valueTransposed);
  const transposedProbabilities = tf.tensor(transposeSquare(probabilities, time), [time, time]);
  const valueGradient = tf.matMul(transposedProbabilities, outputGradient);
  const dP = probabilityGradient.dataSync() as Float32Array;
  const scoreGradient = new Float32Array(time * time);
  causalSoftmaxGradientRows(dP, probabilities, scoreGradient, time);
  const key = tf.tensor(gatherHead(values, shape, b, head, 1, 1, false), [time, headSize]);
  const queryGradient = tf.matMul(tf.tensor(scoreGradient, [time, time]), key);
  const scaledQuery = tf.tensor(gatherHead(values, shape, b, head, 0, scale, false), [time, headSize]);
  const transposedScoreGradient = tf.tensor(transposeSquare(scoreGradient, time), [time, time]);
  const keyGradient = tf.matMul(transposedScoreGradient, scaledQuery);
  scatterHead(queryGradient.dataSync() as Float32Array, shape, b, head, 0, scale, inputGradient, 3 * dModel);
  scatterHead(keyGradient.dataSync() as Float32Array, shape, b, head, 1, 1, inputGradient, 3 * dModel);
  scatterHead(valueGradient.dataSync() as Float32Array, shape, b, head, 2, 1, inputGradient, 3 * dModel);
  tf.dispose([
    outputGradient,
    valueTransposed,
    probabilityGradient,
    transposedProbabilities,
    valueGradient,
    key,
    queryGradient,
    scaledQuery,
    transposedScoreGradient,
    keyGradient,
  ]);
}
