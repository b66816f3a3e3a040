/**
 * [Note: fused matMul epilogue]
 * tfjs's `_FusedMatMul` is matMul, then `add(bias)` (numpy broadcasting against the product),
 * then one activation. The BLAS kernel writes the product with sgemm and applies bias and
 * activation in place in one pass over it, with the same elementwise formulas as tfjs's cpu
 * kernels. It covers the broadcasts a bias or PReLU weight takes in practice: one value, one row
 * of N (shape [..., 1, N] or [N]) or the product's own shape. Anything else (a column [M, 1], a
 * bias that widens the output, an activation tfjs adds later) returns null from
 * `planEpilogue`, and the kernel hands the call to tfjs's kernel before computing anything.
 */

/** How an operand of the epilogue lines up with the product's elements. */
export type Broadcast = 'scalar' | 'row' | 'full';

export type FusedActivation = 'linear' | 'relu' | 'relu6' | 'elu' | 'leakyrelu' | 'prelu' | 'sigmoid';

const activations: ReadonlySet<string> = new Set<FusedActivation>([
  'linear',
  'relu',
  'relu6',
  'elu',
  'leakyrelu',
  'prelu',
  'sigmoid',
]);

export interface EpiloguePlan {
  bias: Broadcast | null;
  activation: FusedActivation;
  /** PReLU's weights, when activation is 'prelu'. */
  preluWeights: Broadcast | null;
  leakyReluAlpha: number;
}

function product(values: readonly number[]): number {
  let result = 1;
  for (const value of values) result *= value;
  return result;
}

/** How `shape` broadcasts onto `outShape` without changing it, or null when not covered. */
export function broadcastOf(shape: readonly number[], outShape: readonly number[]): Broadcast | null {
  if (shape.length > outShape.length) return null;
  if (product(shape) === 1) return 'scalar';
  const offset = outShape.length - shape.length;
  const sameExtents = shape.every((extent, dim) => extent === outShape[dim + offset]);
  if (sameExtents && product(shape) === product(outShape)) return 'full';
  const columns = outShape[outShape.length - 1];
  const leadingOnes = shape.slice(0, -1).every((extent) => extent === 1);
  if (leadingOnes && shape[shape.length - 1] === columns) return 'row';
  return null;
}

/** The epilogue for these operands, or null when tfjs's kernel must run instead. */
export function planEpilogue(
  outShape: readonly number[],
  biasShape: readonly number[] | null,
  activation: unknown,
  preluShape: readonly number[] | null,
  leakyReluAlpha: unknown,
): EpiloguePlan | null {
  const name = activation === undefined || activation === null ? 'linear' : activation;
  if (typeof name !== 'string' || !activations.has(name)) return null;
  const bias = biasShape === null ? null : broadcastOf(biasShape, outShape);
  if (biasShape !== null && bias === null) return null;
  let preluWeights: Broadcast | null = null;
  if (name === 'prelu') {
    if (preluShape === null) return null;
    preluWeights = broadcastOf(preluShape, outShape);
    if (preluWeights === null) return null;
  }
  return {
    bias,
    activation: name as FusedActivation,
    preluWeights,
    leakyReluAlpha: typeof leakyReluAlpha === 'number' ? leakyReluAlpha : 0.2,
  };
}

function addBias(out: Float32Array, bias: Float32Array, broadcast: Broadcast, columns: number): void {
  if (broadcast === 'scalar') {
    const value = bias[0]!;
    for (let index = 0; index < out.length; index++) out[index]! += value;
  } else if (broadcast === 'full') {
    for (let index = 0; index < out.length; index++) out[index]! += bias[index]!;
  } else {
    for (let start = 0; start < out.length; start += columns)
      for (let column = 0; column < columns; column++) out[start + column]! += bias[column]!;
  }
}

function applyPrelu(out: Float32Array, weights: Float32Array, broadcast: Broadcast, columns: number): void {
  for (let index = 0; index < out.length; index++) {
    const value = out[index]!;
    if (value >= 0) continue;
    const weight =
      broadcast === 'scalar'
        ? weights[0]!
        : broadcast === 'full'
          ? weights[index]!
          : weights[index % columns]!;
    out[index] = weight * value;
  }
}

/** Bias then activation, in place on the product `out` (row-major, last dim `columns`). */
export function applyEpilogue(
  plan: EpiloguePlan,
  out: Float32Array,
  columns: number,
  bias: Float32Array | null,
  preluWeights: Float32Array | null,
): void {
  if (out.length === 0) return;
  if (plan.bias !== null && bias !== null) addBias(out, bias, plan.bias, columns);
  switch (plan.activation) {
    case 'linear':
      return;
    case 'relu':
      for (let index = 0; index < out.length; index++) if (out[index]! < 0) out[index] = 0;
      return;
    case 'relu6':
      for (let index = 0; index < out.length; index++) out[index] = Math.min(Math.max(0, out[index]!), 6);
      return;
    case 'elu':
      for (let index = 0; index < out.length; index++) {
        const value = out[index]!;
        if (value < 0) out[index] = Math.exp(value) - 1;
      }
      return;
    case 'leakyrelu': {
      const alpha = plan.leakyReluAlpha;
      for (let index = 0; index < out.length; index++) {
        const value = out[index]!;
        if (value < 0) out[index] = alpha * value;
      }
      return;
    }
    case 'prelu':
      if (preluWeights !== null && plan.preluWeights !== null)
        applyPrelu(out, preluWeights, plan.preluWeights, columns);
      return;
    case 'sigmoid':
      for (let index = 0; index < out.length; index++) out[index] = 1 / (1 + Math.exp(-out[index]!));
      return;
  }
}
