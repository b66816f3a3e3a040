import type { OptionKeys } from '@fsdp-ts/errors';
import type { Parameter } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { GPT2_INIT_STD, normalParameter } from '../init';
import { checkNnOptionKeys } from '../internal/check-option-keys';
import { embeddingGatherKernel, embeddingGatherKernelRuns } from '../internal/embedding-gather-kernel';
import { Module } from '../module';
import type { Generator } from '../random/generator';

/** Options of Embedding. */
export interface EmbeddingOptions {
  generator?: Generator;
  /** Standard deviation of the normal init (default 0.02, GPT-2). */
  initStd?: number;
}

/** The keys of EmbeddingOptions ([Note: option keys] in @fsdp-ts/errors). */
const embeddingOptionKeys = {
  generator: true,
  initStd: true,
} as const satisfies OptionKeys<EmbeddingOptions>;

/**
 * A lookup table: int32 ids of any shape [...] give rows of `weight` [count, dimension], shape
 * [..., dimension]. The gradient is a scatter-add (UnsortedSegmentSum), which tensor's bridge
 * registers for wasm. On wasm and cpu the lookup is one kernel of row copies ([Note: embedding
 * gather as one kernel]); elsewhere tfjs's gather.
 */
export class Embedding extends Module {
  readonly count: number;
  readonly dimension: number;
  readonly weight: Parameter;

  constructor(count: number, dimension: number, options: EmbeddingOptions = {}) {
    super();
    checkNnOptionKeys('Embedding', options, embeddingOptionKeys);
    this.count = count;
    this.dimension = dimension;
    this.weight = this.registerParameter(
      'weight',
      normalParameter([count, dimension], options.initStd ?? GPT2_INIT_STD, options.generator),
    );
  }

  forward(ids: tf.Tensor): tf.Tensor {
    const flat = tf.reshape(ids, [-1]);
    const weight = this.tensor(this.weight);
    const rows = embeddingGatherKernelRuns(weight, flat)
      ? embeddingGatherKernel(weight, flat)
      : tf.gather(weight, flat);
    return tf.reshape(rows, [...ids.shape, this.dimension]);
  }
}
