export interface LambCoefficients {
  beta1: number;
  beta2: number;
  /** 1 − β1 with gradient averaging (the default), else 1. */
  beta3: number;
  eps: number;
  weightDecay: number;
  /** 1 − β1^t and 1 − β2^t with bias correction, 1 and 1 without. */
  biasCorrection1: number;
  biasCorrection2: number;
}

/**
 * LAMB phase 1, in place on the moments, over this rank's elements of one parameter:
 *   m = β1·m + β3·g        v = β2·v + (1 − β2)·g²
 *   u = (m / bc1) / (√v / √bc2 + eps) + weightDecay·p
 * Returns nothing; writes Σp² to `norms[slot]` and Σu² to `norms[slot + 1]` (partial sums of the
 * squared norms, summed across ranks before phase 2). `p` is not changed here.
 */
export function lambMomentsKernel(
  data: Float32Array,
  grad: Float32Array,
  expAvg: Float32Array,
  expAvgSq: Float32Array,
  coefficients: LambCoefficients,
  norms: Float32Array,
  slot: number,
): void {
  const { beta1, beta2, beta3, eps, weightDecay } = coefficients;
  const inverseCorrection1 = 1 / coefficients.biasCorrection1;
  const inverseCorrection2Sqrt = 1 / Math.sqrt(coefficients.biasCorrection2);
  const oneMinusBeta2 = 1 - beta2;
  let weightSquares = 0;
  let updateSquares = 0;
  for (let index = 0; index < data.length; index++) {
    const gradient = grad[index]!;
    expAvg[index] = beta1 * expAvg[index]! + beta3 * gradient;
    expAvgSq[index] = beta2 * expAvgSq[index]! + oneMinusBeta2 * gradient * gradient;
    const parameter = data[index]!;
    const update =
      (expAvg[index]! * inverseCorrection1) / (Math.sqrt(expAvgSq[index]!) * inverseCorrection2Sqrt + eps) +
      weightDecay * parameter;
    weightSquares += parameter * parameter;
    updateSquares += update * update;
  }
  norms[slot] = weightSquares;
  norms[slot + 1] = updateSquares;
}

/**
 * LAMB phase 2: p = p − scale·u, with u recomputed exactly as in phase 1 from the stored moments
 * and the unchanged p (so no temporary buffer), and scale = lr · trust ratio.
 */
export function lambApplyKernel(
  data: Float32Array,
  expAvg: Float32Array,
  expAvgSq: Float32Array,
  coefficients: LambCoefficients,
  scale: number,
): void {
  const { eps, weightDecay } = coefficients;
  const inverseCorrection1 = 1 / coefficients.biasCorrection1;
  const inverseCorrection2Sqrt = 1 / Math.sqrt(coefficients.biasCorrection2);
  for (let index = 0; index < data.length; index++) {
    const parameter = data[index]!;
    const update =
      (expAvg[index]! * inverseCorrection1) / (Math.sqrt(expAvgSq[index]!) * inverseCorrection2Sqrt + eps) +
      weightDecay * parameter;
    data[index] = parameter - scale * update;
  }
}
