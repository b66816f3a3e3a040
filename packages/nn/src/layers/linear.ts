import type { OptionKeys } from '@fsdp-ts/errors';
import { type Parameter, shapesEqual } from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
import { NnError } from '../errors';
import { constantParameter, GPT2_INIT_STD, normalParameter } from '../init';
import { checkNnOptionKeys } from '../internal/check-option-keys';
import { linearKernel } from '../internal/linear-kernel';
import { Module } from '../module';
import type { Generator } from '../random/generator';

/** Options of Linear. */
export interface LinearOptions {
  /** Default true. */
  bias?: boolean;
  /** Source of the initial weights (default: the package's default generator). */
  generator?: Generator;
  /** Standard deviation of the normal init of the weight (default 0.02, GPT-2). */
  initStd?: number;
  /**
   * Use this existing Parameter [outFeatures, inFeatures] as the weight instead of a new one
   * (weight tying, e.g. a GPT's lm head sharing the token embedding table). Not re-initialised.
   */
  weight?: Parameter;
}

/** The keys of LinearOptions ([Note: option keys] in @fsdp-ts/errors). */
const linearOptionKeys = {
  bias: true,
  generator: true,
  initStd: true,
  weight: true,
} as const satisfies OptionKeys<LinearOptions>;

/**
 * y = x · weightᵀ + bias, over the last dimension of x. `weight` has PyTorch's layout
 * [outFeatures, inFeatures], so state dicts match PyTorch and a weight can be tied to an
 * Embedding's table.
 *
 * x of shape [..., in] is folded to [rows, in]; forward and backward are plain 2-D matMuls (see
 * [Note: linear kernel]).
 */
export class Linear extends Module {
  readonly inFeatures: number;
  readonly outFeatures: number;
  readonly weight: Parameter;
  readonly bias: Parameter | null;

  constructor(inFeatures: number, outFeatures: number, options: LinearOptions = {}) {
    super();
    checkNnOptionKeys('Linear', options, linearOptionKeys);
    this.inFeatures = inFeatures;
    this.outFeatures = outFeatures;
    if (options.weight === undefined) {
      this.weight = this.registerParameter(
        'weight',
        normalParameter([outFeatures, inFeatures], options.initStd ?? GPT2_INIT_STD, options.generator),
      );
    } else {
      if (!shapesEqual(options.weight.shape, [outFeatures, inFeatures])) {
        throw new NnError(`Linear: a tied weight of shape [${options.weight.shape.join(', ')}].`, {
          code: 'shape-mismatch',
          expected: [outFeatures, inFeatures],
          actual: options.weight.shape,
          fix: 'tie a Parameter of shape [outFeatures, inFeatures].',
        });
      }
      this.weight = this.registerParameter('weight', options.weight);
    }
    this.bias =
      options.bias === false ? null : this.registerParameter('bias', constantParameter([outFeatures], 0));
  }

  forward(x: tf.Tensor): tf.Tensor {
    const given = x.shape[x.shape.length - 1];
    if (given !== this.inFeatures) {
      throw new NnError(
        `Linear(${this.inFeatures} → ${this.outFeatures}): the input's last dimension is ${given}, expected ${this.inFeatures} (input shape [${x.shape.join(', ')}]).`,
        {
          code: 'shape-mismatch',
          expected: [this.inFeatures],
          actual: x.shape,
          fix: `pass an input of shape [..., ${this.inFeatures}], or build the layer as Linear(${given}, ${this.outFeatures}).`,
        },
      );
    }
    return linearKernel(x, this.tensor(this.weight), this.bias === null ? null : this.tensor(this.bias));
  }
}
