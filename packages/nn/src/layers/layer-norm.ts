import type { OptionKeys } from '@fsdp-ts/errors';
import type { Parameter } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { constantParameter } from '../init';
import { arrayKernelsRun } from '../internal/array-kernel';
import { checkNnOptionKeys } from '../internal/check-option-keys';
import { layerNormKernel } from '../internal/layer-norm-kernel';
import { sumRows } from '../internal/sum-rows';
import { Module } from '../module';

/** Options of LayerNorm. */
export interface LayerNormOptions {
  /** Added to the variance (default 1e-5, PyTorch's). */
  epsilon?: number;
}

/** The keys of LayerNormOptions ([Note: option keys] in @fsdp-ts/errors). */
const layerNormOptionKeys = {
  epsilon: true,
} as const satisfies OptionKeys<LayerNormOptions>;

/**
 * Normalises the last dimension to mean 0 and variance 1 (biased variance, like PyTorch), then
 * scales by `weight` (init 1) and shifts by `bias` (init 0).
 *
 * The gradient is written out (one customGrad) instead of differentiating the ~8 ops of the
 * forward: dx = rstd · (g - mean(g) - x̂ · mean(g · x̂)) with g = dy · weight. On wasm and cpu
 * forward and backward are one kernel each (see [Note: array kernels]).
 */
export class LayerNorm extends Module {
  readonly dimension: number;
  readonly epsilon: number;
  readonly weight: Parameter;
  readonly bias: Parameter;

  constructor(dimension: number, options: LayerNormOptions = {}) {
    super();
    checkNnOptionKeys('LayerNorm', options, layerNormOptionKeys, {
      eps: "torch.nn.LayerNorm's eps is epsilon here",
    });
    this.dimension = dimension;
    this.epsilon = options.epsilon ?? 1e-5;
    this.weight = this.registerParameter('weight', constantParameter([dimension], 1));
    this.bias = this.registerParameter('bias', constantParameter([dimension], 0));
  }

  forward(x: tf.Tensor): tf.Tensor {
    return layerNorm(x, this.tensor(this.weight), this.tensor(this.bias), this.epsilon);
  }
}

/** Functional layer norm over the last dimension (see LayerNorm). */
export function layerNorm(x: tf.Tensor, weight: tf.Tensor, bias: tf.Tensor, epsilon = 1e-5): tf.Tensor {
  if (arrayKernelsRun() && x.dtype === 'float32' && weight.dtype === 'float32' && bias.dtype === 'float32') {
    return layerNormKernel(x, weight, bias, epsilon);
  }
  return layerNormWithOps(x, weight, bias, epsilon);
}

/** Layer norm as tfjs ops with a written-out gradient: other backends, and the kernels' test oracle. */
export function layerNormWithOps(
  x: tf.Tensor,
  weight: tf.Tensor,
  bias: tf.Tensor,
  epsilon = 1e-5,
): tf.Tensor {
  const dimension = x.shape[x.rank - 1]!;
  const compute = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [input, gamma, beta] = args as [tf.Tensor, tf.Tensor, tf.Tensor];
    const save = args[3] as tf.GradSaveFunc;
    const rows = tf.reshape(input, [-1, dimension]);
    const mean = tf.mean(rows, 1, true);
    const centred = tf.sub(rows, mean);
    const variance = tf.mean(tf.square(centred), 1, true);
    const inverseStd = tf.rsqrt(tf.add(variance, epsilon));
    const normalised = tf.mul(centred, inverseStd);
    const value = tf.reshape(tf.add(tf.mul(normalised, gamma), beta), input.shape);
    save([normalised, inverseStd, gamma]);
    return {
      value,
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const [savedNormalised, savedInverseStd, savedGamma] = saved as [tf.Tensor, tf.Tensor, tf.Tensor];
        const gradient = tf.reshape(dy as tf.Tensor, [-1, dimension]);
        const gradientGamma = sumRows(tf.mul(gradient, savedNormalised));
        const gradientBeta = sumRows(gradient);
        const scaled = tf.mul(gradient, savedGamma);
        const meanScaled = tf.mean(scaled, 1, true);
        const meanProjection = tf.mean(tf.mul(scaled, savedNormalised), 1, true);
        const inner = tf.sub(tf.sub(scaled, meanScaled), tf.mul(savedNormalised, meanProjection));
        const gradientInput = tf.reshape(tf.mul(inner, savedInverseStd), (dy as tf.Tensor).shape);
        return [gradientInput, gradientGamma, gradientBeta];
      },
    };
  });
  return compute(x, weight, bias);
}
