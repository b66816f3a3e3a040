import type { OptionKeys } from '@fsdp-ts/errors';
import * as tf from '@tensorflow/tfjs-core';
import { NnError } from '../errors';
import { GPT2_INIT_STD } from '../init';
import { checkNnOptionKeys } from '../internal/check-option-keys';
import { Module } from '../module';
import { Generator } from '../random/generator';
import { Dropout } from './dropout';
import { Embedding } from './embedding';
import { LayerNorm } from './layer-norm';
import { Linear } from './linear';
import { ModuleList } from './module-list';
import { TransformerBlock } from './transformer-block';

/** The size of a GPT: vocabulary, width, layers, heads, sequence length, and whether embeddings are tied. */
export interface GPTConfig {
  vocabSize: number;
  dModel: number;
  nLayers: number;
  nHeads: number;
  /** Longest sequence (rows of the position embedding). */
  seqLen: number;
  /** Default true: the lm head multiplies by the token embedding table. */
  tieEmbeddings?: boolean;
  /** Seed of the initial weights (default 0). */
  seed?: number;
  /** Dropout after the embeddings and on every residual branch (default 0). */
  dropout?: number;
}

/** The keys of GPTConfig ([Note: option keys] in @fsdp-ts/errors). */
const gptConfigKeys = {
  vocabSize: true,
  dModel: true,
  nLayers: true,
  nHeads: true,
  seqLen: true,
  tieEmbeddings: true,
  seed: true,
  dropout: true,
} as const satisfies OptionKeys<GPTConfig>;

/**
 * A GPT-2 style decoder: token + learned position embeddings → nLayers pre-LN TransformerBlocks →
 * final LayerNorm → lm head (no bias). tokens [B, T] int32 (T ≤ seqLen) → logits [B, T, vocabSize].
 *
 * Parameter names: tokenEmbedding.weight, positionEmbedding.weight, blocks.{i}.attentionNorm.*,
 * blocks.{i}.attention.inputProjection.* (fused q,k,v), blocks.{i}.attention.outputProjection.*,
 * blocks.{i}.mlpNorm.*, blocks.{i}.mlp.inputProjection.*, blocks.{i}.mlp.outputProjection.*,
 * finalNorm.*, and lmHead.weight when embeddings are not tied (tied: the lm head's weight is
 * tokenEmbedding.weight, listed once under that name). Init: see [Note: initialisation].
 */
export class GPT extends Module {
  readonly config: Required<GPTConfig>;
  readonly tokenEmbedding: Embedding;
  readonly positionEmbedding: Embedding;
  readonly embeddingDropout: Dropout;
  readonly blocks: ModuleList<TransformerBlock>;
  readonly finalNorm: LayerNorm;
  readonly lmHead: Linear;

  constructor(config: GPTConfig) {
    super();
    checkNnOptionKeys('GPT', config, gptConfigKeys, {
      n_layer: "nanoGPT's n_layer is nLayers here",
      n_head: "nanoGPT's n_head is nHeads here",
      n_embd: "nanoGPT's n_embd is dModel here",
      block_size: "nanoGPT's block_size is seqLen here",
      n_positions: "Hugging Face's n_positions is seqLen here",
      tie_word_embeddings: "Hugging Face's tie_word_embeddings is tieEmbeddings here",
    });
    this.config = { tieEmbeddings: true, seed: 0, dropout: 0, ...config };
    const { vocabSize, dModel, nLayers, nHeads, seqLen, tieEmbeddings, seed, dropout } = this.config;
    const generator = new Generator(seed);
    this.tokenEmbedding = this.registerModule(
      'tokenEmbedding',
      new Embedding(vocabSize, dModel, { generator }),
    );
    this.positionEmbedding = this.registerModule(
      'positionEmbedding',
      new Embedding(seqLen, dModel, { generator }),
    );
    this.embeddingDropout = this.registerModule('embeddingDropout', new Dropout(dropout, { seed: seed + 1 }));
    const residualInitStd = GPT2_INIT_STD / Math.sqrt(2 * nLayers);
    this.blocks = this.registerModule('blocks', new ModuleList<TransformerBlock>());
    for (let layer = 0; layer < nLayers; layer++) {
      this.blocks.push(
        new TransformerBlock(dModel, nHeads, {
          generator,
          residualInitStd,
          dropout,
          dropoutSeed: seed + 2 + 2 * layer,
        }),
      );
    }
    this.finalNorm = this.registerModule('finalNorm', new LayerNorm(dModel));
    this.lmHead = this.registerModule(
      'lmHead',
      new Linear(dModel, vocabSize, {
        bias: false,
        generator,
        ...(tieEmbeddings ? { weight: this.tokenEmbedding.weight } : {}),
      }),
    );
  }

  /** tokens [B, T] int32 → logits [B, T, vocabSize]. */
  forward(tokens: tf.Tensor): tf.Tensor {
    const [batch, time] = tokens.shape as [number, number];
    if (tokens.rank !== 2 || time > this.config.seqLen || tokens.dtype !== 'int32') {
      throw new NnError(`GPT.forward: ${tokens.dtype} tokens of shape [${tokens.shape.join(', ')}].`, {
        code: 'shape-mismatch',
        expected: `int32 [batch, time] with time <= seqLen ${this.config.seqLen}`,
        actual: { shape: tokens.shape, dtype: tokens.dtype },
        fix: 'pass int32 token ids of shape [batch, time], cropping sequences to seqLen.',
      });
    }
    // Positions per token ([B, T], not [T] broadcast): the gradient is then a scatter-add, not a
    // reduction over the batch axis (slow on wasm, see [Note: reducing over rows]).
    const positions = tf.tile(tf.reshape(tf.range(0, time, 1, 'int32'), [1, time]), [batch, 1]);
    let x = tf.add(this.tokenEmbedding.forward(tokens), this.positionEmbedding.forward(positions));
    x = this.embeddingDropout.forward(x);
    for (const block of this.blocks) x = block.forward(x);
    return this.lmHead.forward(this.finalNorm.forward(x));
  }
}
