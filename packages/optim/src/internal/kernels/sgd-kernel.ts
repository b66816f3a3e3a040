export interface SgdCoefficients {
  lr: number;
  momentum: number;
  dampening: number;
  weightDecay: number;
  nesterov: boolean;
  maximize: boolean;
}

/**
 * One SGD step in place, as torch.optim.SGD (1.13, single-tensor path):
 *   d = scale·(±grad + weightDecay·p)                 (scale is 1 for SGD, the trust ratio for LARS)
 *   buf = d on the first step, else momentum·buf + (1 − dampening)·d
 *   d = nesterov ? d + momentum·buf : buf          (when momentum ≠ 0)
 *   p = p − lr·d
 * `momentumBuffer` is null when momentum is 0; `firstStep` says whether it is uninitialised.
 */
export function sgdKernel(
  data: Float32Array,
  grad: Float32Array,
  momentumBuffer: Float32Array | null,
  firstStep: boolean,
  coefficients: SgdCoefficients,
  scale = 1,
): void {
  // [Note: float32 rounding like torch] torch computes in float32 with float32 scalars and rounds
  // after each op; rounding where it does keeps momentum trajectories within 1e-6 of it.
  const round = Math.fround;
  const lr = round(coefficients.lr);
  const momentum = round(coefficients.momentum);
  const weightDecay = round(coefficients.weightDecay);
  const nesterov = coefficients.nesterov;
  const sign = coefficients.maximize ? -1 : 1;
  const length = data.length;
  if (momentumBuffer === null) {
    for (let index = 0; index < length; index++) {
      const parameter = data[index]!;
      data[index] = parameter - lr * round(scale * round(sign * grad[index]! + weightDecay * parameter));
    }
    return;
  }
  const keep = firstStep ? 0 : momentum;
  const take = firstStep ? 1 : round(1 - coefficients.dampening);
  for (let index = 0; index < length; index++) {
    const parameter = data[index]!;
    const direction = round(scale * round(sign * grad[index]! + weightDecay * parameter));
    momentumBuffer[index] = round(keep * momentumBuffer[index]!) + take * direction;
    const buffered = momentumBuffer[index]!;
    const step = nesterov ? round(direction + momentum * buffered) : buffered;
    data[index] = parameter - lr * step;
  }
}
