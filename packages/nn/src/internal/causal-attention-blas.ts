import {
  CBLAS_NO_TRANSPOSE as N,
  CBLAS_ROW_MAJOR as ROW_MAJOR,
  type Sgemm,
  CBLAS_TRANSPOSE as T,
} from '@fsdp-ts/tensor/internal';
import { causalSoftmaxGradientRows, causalSoftmaxRows } from './causal-softmax';
import type { AttentionShape } from './head-layout';

/**
 * [Note: attention on BLAS]
 * With OpenBLAS loaded, one (batch, head) of attention is five sgemm calls straight on the
 * arrays of qkv [B, T, 3·D], the output [B, T, D] and their gradients: a head is a [T, headSize]
 * block at column offset part·D + head·headSize with leading dimension 3·D (or D), so nothing is
 * gathered, scattered, transposed or wrapped in a tensor. Same math as [Note: attention kernel].
 * Every head writes a disjoint block of the output and of the input gradient (beta = 0).
 */
function offsets(shape: AttentionShape, b: number, head: number) {
  const { time, dModel, headSize } = shape;
  const row = b * time * 3 * dModel + head * headSize;
  return {
    query: row,
    key: row + dModel,
    value: row + 2 * dModel,
    output: b * time * dModel + head * headSize,
  };
}

export function forwardHeadBlas(
  sgemm: Sgemm,
  values: Float32Array,
  shape: AttentionShape,
  b: number,
  head: number,
  probabilities: Float32Array,
  output: Float32Array,
): void {
  headScoresBlas(sgemm, values, shape, b, head, probabilities);
  // The causal softmax in place (float64 accumulators).
  causalSoftmaxRows(probabilities, probabilities, shape.time);
  headOutputBlas(sgemm, values, shape, b, head, probabilities, output);
}

/** S = q·kᵀ / √headSize of one (batch, head) into `scores` [T, T] (every element written). */
export function headScoresBlas(
  sgemm: Sgemm,
  values: Float32Array,
  shape: AttentionShape,
  b: number,
  head: number,
  scores: Float32Array,
): void {
  const { time, headSize, dModel } = shape;
  const at = offsets(shape, b, head);
  sgemm(
    ROW_MAJOR,
    N,
    T,
    time,
    time,
    headSize,
    1 / Math.sqrt(headSize),
    values.subarray(at.query),
    3 * dModel,
    values.subarray(at.key),
    3 * dModel,
    0,
    scores,
    time,
  );
}

/** O = P·v of one (batch, head) into its block of `output` [B, T, D]. */
export function headOutputBlas(
  sgemm: Sgemm,
  values: Float32Array,
  shape: AttentionShape,
  b: number,
  head: number,
  probabilities: Float32Array,
  output: Float32Array,
): void {
  const { time, headSize, dModel } = shape;
  const at = offsets(shape, b, head);
  sgemm(
    ROW_MAJOR,
    N,
    N,
    time,
    headSize,
    time,
    1,
    probabilities,
    time,
    values.subarray(at.value),
    3 * dModel,
    0,
    output.subarray(at.output),
    dModel,
  );
}

export function backwardHeadBlas(
  sgemm: Sgemm,
  values: Float32Array,
  gradient: Float32Array,
  shape: AttentionShape,
  b: number,
  head: number,
  probabilities: Float32Array,
  scratch: Float32Array,
  inputGradient: Float32Array,
): void {
  const { time, headSize, dModel } = shape;
  const at = offsets(shape, b, head);
  const scale = 1 / Math.sqrt(headSize);
  const outputGradient = gradient.subarray(at.output);
  // dv = Pᵀ·dO
  sgemm(
    ROW_MAJOR,
    T,
    N,
    time,
    headSize,
    time,
    1,
    probabilities,
    time,
    outputGradient,
    dModel,
    0,
    inputGradient.subarray(at.value),
    3 * dModel,
  );
  // dP = dO·vᵀ into scratch, then dS = P ⊙ (dP - rowsum(dP ⊙ P)) in place (zero above the diagonal).
  sgemm(
    ROW_MAJOR,
    N,
    T,
    time,
    time,
    headSize,
    1,
    outputGradient,
    dModel,
    values.subarray(at.value),
    3 * dModel,
    0,
    scratch,
    time,
  );
  causalSoftmaxGradientRows(scratch, probabilities, scratch, time);
  // dq = s · dS·k,  dk = s · dSᵀ·q
  sgemm(
    ROW_MAJOR,
    N,
    N,
    time,
    headSize,
    time,
    scale,
    scratch,
    time,
    values.subarray(at.key),
    3 * dModel,
    0,
    inputGradient.subarray(at.query),
    3 * dModel,
  );
  sgemm(
    ROW_MAJOR,
    T,
    N,
    time,
    headSize,
    time,
    scale,
    scratch,
    time,
    values.subarray(at.query),
    3 * dModel,
    0,
    inputGradient.subarray(at.key),
    3 * dModel,
  );
}
