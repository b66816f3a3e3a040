import type { OptionKeys } from '@fsdp-ts/errors';
import type * as tf from '@tensorflow/tfjs-core';
import { NnError } from '../errors';
import { GPT2_INIT_STD } from '../init';
import { causalAttention } from '../internal/causal-attention';
import { checkNnOptionKeys } from '../internal/check-option-keys';
import { Module } from '../module';
import type { Generator } from '../random/generator';
import { Linear } from './linear';

/** Options of CausalSelfAttention. */
export interface CausalSelfAttentionOptions {
  generator?: Generator;
  /** Init std of the output projection (a GPT scales it by 1/√(2·nLayers)). */
  outputInitStd?: number;
}

/** The keys of CausalSelfAttentionOptions ([Note: option keys] in @fsdp-ts/errors). */
const causalSelfAttentionOptionKeys = {
  generator: true,
  outputInitStd: true,
} as const satisfies OptionKeys<CausalSelfAttentionOptions>;

/**
 * Multi-head causal self-attention: one fused projection to q, k, v ([3·dModel, dModel], as
 * nanoGPT's c_attn), softmax(q·kᵀ/√headSize + causal mask)·v per head, and an output projection.
 * The attention core is one customGrad with its backward written out (see causal-attention.ts).
 */
export class CausalSelfAttention extends Module {
  readonly dModel: number;
  readonly heads: number;
  readonly inputProjection: Linear;
  readonly outputProjection: Linear;

  constructor(dModel: number, heads: number, options: CausalSelfAttentionOptions = {}) {
    super();
    checkNnOptionKeys('CausalSelfAttention', options, causalSelfAttentionOptionKeys);
    if (!Number.isInteger(dModel / heads)) {
      throw new NnError(`CausalSelfAttention: dModel ${dModel} is not divisible by ${heads} heads.`, {
        code: 'invalid-argument',
        expected: 'dModel a multiple of heads',
        actual: { dModel, heads },
        fix: 'pick a head count that divides dModel.',
      });
    }
    this.dModel = dModel;
    this.heads = heads;
    const generator = options.generator === undefined ? {} : { generator: options.generator };
    this.inputProjection = this.registerModule('inputProjection', new Linear(dModel, 3 * dModel, generator));
    this.outputProjection = this.registerModule(
      'outputProjection',
      new Linear(dModel, dModel, { ...generator, initStd: options.outputInitStd ?? GPT2_INIT_STD }),
    );
  }

  /** x: [B, T, dModel] → [B, T, dModel]. */
  forward(x: tf.Tensor): tf.Tensor {
    return this.outputProjection.forward(causalAttention(this.inputProjection.forward(x), this.heads));
  }
}
