import type { OptionKeys } from '@fsdp-ts/errors';
import * as tf from '@tensorflow/tfjs-core';
import { GPT2_INIT_STD } from '../init';
import { checkNnOptionKeys } from '../internal/check-option-keys';
import { Module } from '../module';
import type { Generator } from '../random/generator';
import { CausalSelfAttention } from './causal-self-attention';
import { Dropout } from './dropout';
import { LayerNorm } from './layer-norm';
import { MLP } from './mlp';

/** Options of TransformerBlock. */
export interface TransformerBlockOptions {
  generator?: Generator;
  /** Init std of the two residual output projections (default 0.02). */
  residualInitStd?: number;
  /** Dropout on each residual branch (default 0). */
  dropout?: number;
  /** Seed of the dropout masks (default 0). */
  dropoutSeed?: number;
}

/** The keys of TransformerBlockOptions ([Note: option keys] in @fsdp-ts/errors). */
const transformerBlockOptionKeys = {
  generator: true,
  residualInitStd: true,
  dropout: true,
  dropoutSeed: true,
} as const satisfies OptionKeys<TransformerBlockOptions>;

/**
 * A pre-LayerNorm transformer block (GPT-2):
 *   x = x + dropout(attention(attentionNorm(x)))
 *   x = x + dropout(mlp(mlpNorm(x)))
 * The FSDP wrapping policy targets this class: one block, one unit.
 */
export class TransformerBlock extends Module {
  readonly attentionNorm: LayerNorm;
  readonly attention: CausalSelfAttention;
  readonly mlpNorm: LayerNorm;
  readonly mlp: MLP;
  readonly attentionDropout: Dropout;
  readonly mlpDropout: Dropout;

  constructor(dModel: number, heads: number, options: TransformerBlockOptions = {}) {
    super();
    checkNnOptionKeys('TransformerBlock', options, transformerBlockOptionKeys);
    const outputInitStd = options.residualInitStd ?? GPT2_INIT_STD;
    const generator = options.generator === undefined ? {} : { generator: options.generator };
    const rate = options.dropout ?? 0;
    const seed = options.dropoutSeed ?? 0;
    this.attentionNorm = this.registerModule('attentionNorm', new LayerNorm(dModel));
    this.attention = this.registerModule(
      'attention',
      new CausalSelfAttention(dModel, heads, { ...generator, outputInitStd }),
    );
    this.attentionDropout = this.registerModule('attentionDropout', new Dropout(rate, { seed }));
    this.mlpNorm = this.registerModule('mlpNorm', new LayerNorm(dModel));
    this.mlp = this.registerModule('mlp', new MLP(dModel, { ...generator, outputInitStd }));
    this.mlpDropout = this.registerModule('mlpDropout', new Dropout(rate, { seed: seed + 1 }));
  }

  /** x: [B, T, dModel] → [B, T, dModel]. */
  forward(x: tf.Tensor): tf.Tensor {
    const attended = tf.add(
      x,
      this.attentionDropout.forward(this.attention.forward(this.attentionNorm.forward(x))),
    );
    return tf.add(attended, this.mlpDropout.forward(this.mlp.forward(this.mlpNorm.forward(attended))));
  }
}
