import { sgdKernel } from './internal/kernels/sgd-kernel';
import { sumOfSquares } from './internal/kernels/sum-of-squares';
import { mergeOptions } from './internal/merge-options';
import { NormAdaptiveOptimizer } from './internal/norm-adaptive-optimizer';
import { checkBoolean, checkNesterov, checkNonNegative } from './internal/validate';
import type { NormReductionGroup } from './norm-reduction-group';
import type { PreparedParameter } from './optimizer';
import type { BaseOptions, ParamGroup, ParamsInput } from './param-group';

export interface LARSOptions extends BaseOptions {
  momentum: number;
  dampening: number;
  weightDecay: number;
  nesterov: boolean;
  /** η of the paper: the trust ratio is trustCoefficient·‖p‖ / (‖g‖ + wd·‖p‖ + eps). */
  trustCoefficient: number;
  eps: number;
  /** LARC clipping: use min(ratio / lr, 1) as the ratio. Default false. */
  trustClip: boolean;
  /** Adapt parameters whose group has weightDecay 0 too. Default false: they take plain SGD steps. */
  alwaysAdapt: boolean;
}

/** LARS's default hyperparameters. */
export const larsDefaults: Readonly<LARSOptions> = Object.freeze({
  lr: 1.0,
  momentum: 0,
  dampening: 0,
  weightDecay: 0,
  nesterov: false,
  trustCoefficient: 0.001,
  eps: 1e-8,
  trustClip: false,
  alwaysAdapt: false,
});

/**
 * Options of the LARS constructor: hyperparameters, and the process group the parameters are sharded over.
 */
export interface LARSConstructorOptions extends Partial<LARSOptions> {
  /** The process group the parameters are sharded over; see [Note: sharded norms]. */
  group?: NormReductionGroup;
}

/**
 * LARS (You et al. 2017, "Large Batch Training of Convolutional Networks"), defined as timm's `Lars`
 * (LARS + apex LARC clipping on top of torch SGD):
 *   r = η·‖p‖ / (‖g‖ + wd·‖p‖ + eps) if ‖p‖ > 0 and ‖g‖ > 0 else 1   (min(r/lr, 1) with trustClip;
 *       r = 1 and no decay when wd = 0 and not alwaysAdapt)
 *   d = r·(g + wd·p), then torch SGD momentum/dampening/nesterov on d, and p = p − lr·d
 * with ‖·‖ the norm of the whole parameter, even when this rank holds a shard. p.grad is not modified.
 */
export class LARS extends NormAdaptiveOptimizer<LARSOptions> {
  get kind(): string {
    return 'LARS';
  }

  constructor(params: ParamsInput<LARSOptions>, options: LARSConstructorOptions = {}) {
    const group = options.group;
    super(params, mergeOptions('LARS', larsDefaults, options, ['group']), group ?? null);
  }

  protected validateGroup(group: LARSOptions, where: string): void {
    for (const key of ['lr', 'momentum', 'dampening', 'weightDecay', 'trustCoefficient', 'eps'] as const) {
      checkNonNegative(where, key, group[key]);
    }
    for (const key of ['nesterov', 'trustClip', 'alwaysAdapt'] as const) checkBoolean(where, key, group[key]);
    checkNesterov(where, group.nesterov, group.momentum, group.dampening);
  }

  protected accumulate(
    _group: ParamGroup<LARSOptions>,
    { arrays }: PreparedParameter,
    norms: Float32Array,
    slot: number,
  ): void {
    norms[slot] = sumOfSquares(arrays.data);
    norms[slot + 1] = sumOfSquares(arrays.grad);
  }

  protected apply(
    group: ParamGroup<LARSOptions>,
    { arrays, state }: PreparedParameter,
    weightNorm: number,
    gradNorm: number,
  ): void {
    const adapt = group.weightDecay !== 0 || group.alwaysAdapt;
    let trustRatio = 1;
    if (adapt) {
      if (weightNorm > 0 && gradNorm > 0) {
        trustRatio =
          (group.trustCoefficient * weightNorm) / (gradNorm + weightNorm * group.weightDecay + group.eps);
      }
      if (group.trustClip) trustRatio = Math.min(trustRatio / group.lr, 1);
    }
    const firstStep = !state.buffers.has('momentumBuffer');
    const momentumBuffer = group.momentum === 0 ? null : state.buffer('momentumBuffer');
    sgdKernel(
      arrays.data,
      arrays.grad,
      momentumBuffer,
      firstStep,
      { ...group, weightDecay: adapt ? group.weightDecay : 0, maximize: false },
      trustRatio,
    );
    state.step += 1;
  }
}
