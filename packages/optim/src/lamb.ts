import { type LambCoefficients, lambApplyKernel, lambMomentsKernel } from './internal/kernels/lamb-kernel';
import {
  lambApplySimdKernel,
  lambMomentsSimdKernel,
  lambSimdAvailable,
} from './internal/kernels/lamb-simd-kernel';
import { mergeOptions } from './internal/merge-options';
import { NormAdaptiveOptimizer } from './internal/norm-adaptive-optimizer';
import { checkBetas, checkBoolean, checkNonNegative } from './internal/validate';
import type { NormReductionGroup } from './norm-reduction-group';
import type { PreparedParameter } from './optimizer';
import type { BaseOptions, ParamGroup, ParamsInput } from './param-group';

export interface LAMBOptions extends BaseOptions {
  betas: readonly [number, number];
  eps: number;
  /** Added to the update inside the trust-ratio scaling (u + wd·p), as in the paper and timm. */
  weightDecay: number;
  /** Divide the moments by 1 − β^t (default true). */
  biasCorrection: boolean;
  /** m = β1·m + (1 − β1)·g (true, default) or m = β1·m + g. */
  gradAveraging: boolean;
  /** Clamp the trust ratio at 1 (LAMBC). Default false. */
  trustClip: boolean;
  /** Adapt parameters whose group has weightDecay 0 too. Default false: they take plain Adam-like steps. */
  alwaysAdapt: boolean;
}

/** LAMB's default hyperparameters. */
export const lambDefaults: Readonly<LAMBOptions> = Object.freeze({
  lr: 1e-3,
  betas: Object.freeze([0.9, 0.999] as const),
  eps: 1e-6,
  weightDecay: 0.01,
  biasCorrection: true,
  gradAveraging: true,
  trustClip: false,
  alwaysAdapt: false,
});

/**
 * Options of the LAMB constructor: hyperparameters, and the process group the parameters are sharded over.
 */
export interface LAMBConstructorOptions extends Partial<LAMBOptions> {
  /** The process group the parameters are sharded over; see [Note: sharded norms]. */
  group?: NormReductionGroup;
}

/**
 * LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"), defined as timm's `Lamb`
 * (the PyTorch version of apex FusedLAMB) with `max_grad_norm=None`:
 *   m = β1·m + β3·g,  v = β2·v + (1 − β2)·g²,  u = (m/bc1) / (√v/√bc2 + eps) + wd·p
 *   r = ‖p‖/‖u‖ if both are > 0 else 1 (clamped at 1 with trustClip; r = 1 when wd = 0 and not alwaysAdapt)
 *   p = p − lr·r·u
 * with ‖·‖ the norm of the whole parameter, even when this rank holds a shard. Both phases run as
 * WebAssembly SIMD in float32 where available (norms summed in float64; lamb-simd-kernel.ts), else
 * as JavaScript loops. Global gradient-norm
 * clipping (timm/apex's max_grad_norm) is not done here: clip before step() (FSDP clips across
 * shards). The step count is per parameter (as torch.optim's Adam), where timm counts per group;
 * they agree whenever every parameter has a gradient on every step.
 */
export class LAMB extends NormAdaptiveOptimizer<LAMBOptions> {
  get kind(): string {
    return 'LAMB';
  }

  constructor(params: ParamsInput<LAMBOptions>, options: LAMBConstructorOptions = {}) {
    const group = options.group;
    super(params, mergeOptions('LAMB', lambDefaults, options, ['group']), group ?? null);
  }

  protected validateGroup(group: LAMBOptions, where: string): void {
    checkNonNegative(where, 'lr', group.lr);
    checkBetas(where, group.betas);
    checkNonNegative(where, 'eps', group.eps);
    checkNonNegative(where, 'weightDecay', group.weightDecay);
    for (const key of ['biasCorrection', 'gradAveraging', 'trustClip', 'alwaysAdapt'] as const) {
      checkBoolean(where, key, group[key]);
    }
  }

  protected override stateBufferNames(): readonly string[] {
    return ['expAvg', 'expAvgSq'];
  }

  protected accumulate(
    group: ParamGroup<LAMBOptions>,
    { arrays, state }: PreparedParameter,
    norms: Float32Array,
    slot: number,
  ): void {
    state.step += 1;
    (lambSimdAvailable() ? lambMomentsSimdKernel : lambMomentsKernel)(
      arrays.data,
      arrays.grad,
      state.buffer('expAvg'),
      state.buffer('expAvgSq'),
      coefficients(group, state.step),
      norms,
      slot,
    );
  }

  protected apply(
    group: ParamGroup<LAMBOptions>,
    { arrays, state }: PreparedParameter,
    weightNorm: number,
    updateNorm: number,
  ): void {
    let trustRatio = 1;
    if (group.weightDecay !== 0 || group.alwaysAdapt) {
      if (weightNorm > 0 && updateNorm > 0) trustRatio = weightNorm / updateNorm;
      if (group.trustClip) trustRatio = Math.min(trustRatio, 1);
    }
    (lambSimdAvailable() ? lambApplySimdKernel : lambApplyKernel)(
      arrays.data,
      state.buffer('expAvg'),
      state.buffer('expAvgSq'),
      coefficients(group, state.step),
      group.lr * trustRatio,
    );
  }
}

function coefficients(group: LAMBOptions, step: number): LambCoefficients {
  const [beta1, beta2] = group.betas;
  return {
    beta1,
    beta2,
    beta3: group.gradAveraging ? 1 - beta1 : 1,
    eps: group.eps,
    weightDecay: group.weightDecay,
    biasCorrection1: group.biasCorrection ? 1 - beta1 ** step : 1,
    biasCorrection2: group.biasCorrection ? 1 - beta2 ** step : 1,
  };
}
