export interface AdamCoefficients {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** AdamW: p ← p·(1 − lr·weightDecay) before the update; Adam: grad += weightDecay·p. */
  decoupledWeightDecay: boolean;
  maximize: boolean;
  /** The step number after incrementing (1 on the first step). */
  step: number;
}

/**
 * One Adam/AdamW step in place, as torch.optim.Adam/AdamW (1.13, single-tensor path):
 *   g = ±grad (+ weightDecay·p for Adam)            p = p·(1 − lr·wd) first for AdamW
 *   m = β1·m + (1 − β1)·g        v = β2·v + (1 − β2)·g²        (v̂max = max(v̂max, v) with amsgrad)
 *   p = p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps)
 * `maxExpAvgSq` is null unless amsgrad.
 */
export function adamKernel(
  data: Float32Array,
  grad: Float32Array,
  expAvg: Float32Array,
  expAvgSq: Float32Array,
  maxExpAvgSq: Float32Array | null,
  coefficients: AdamCoefficients,
): void {
  const { lr, beta1, beta2, eps, weightDecay, step } = coefficients;
  const stepSize = lr / (1 - beta1 ** step);
  const inverseCorrection2Sqrt = 1 / Math.sqrt(1 - beta2 ** step);
  // torch rounds p·(1 − lr·wd) to float32 before the Adam step (AdamW); so does this (exact for Adam).
  const round = Math.fround;
  const decay = coefficients.decoupledWeightDecay ? round(1 - lr * weightDecay) : 1;
  const l2 = coefficients.decoupledWeightDecay ? 0 : weightDecay;
  const sign = coefficients.maximize ? -1 : 1;
  const oneMinusBeta1 = 1 - beta1;
  const oneMinusBeta2 = 1 - beta2;
  const length = data.length;
  if (maxExpAvgSq === null) {
    for (let index = 0; index < length; index++) {
      const parameter = round(data[index]! * decay);
      const gradient = sign * grad[index]! + l2 * parameter;
      const average = beta1 * expAvg[index]! + oneMinusBeta1 * gradient;
      const averageSquare = beta2 * expAvgSq[index]! + oneMinusBeta2 * gradient * gradient;
      expAvg[index] = average;
      expAvgSq[index] = averageSquare;
      data[index] =
        parameter - (stepSize * average) / (Math.sqrt(averageSquare) * inverseCorrection2Sqrt + eps);
    }
    return;
  }
  for (let index = 0; index < length; index++) {
    const parameter = round(data[index]! * decay);
    const gradient = sign * grad[index]! + l2 * parameter;
    expAvg[index] = beta1 * expAvg[index]! + oneMinusBeta1 * gradient;
    expAvgSq[index] = beta2 * expAvgSq[index]! + oneMinusBeta2 * gradient * gradient;
    const maximum = Math.max(maxExpAvgSq[index]!, expAvgSq[index]!);
    maxExpAvgSq[index] = maximum;
    data[index] =
      parameter - (stepSize * expAvg[index]!) / (Math.sqrt(maximum) * inverseCorrection2Sqrt + eps);
  }
}
