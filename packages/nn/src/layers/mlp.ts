import type { OptionKeys } from '@fsdp-ts/errors';
import type * as tf from '@tensorflow/tfjs-core';
import { GPT2_INIT_STD } from '../init';
import { checkNnOptionKeys } from '../internal/check-option-keys';
import { Module } from '../module';
import type { Generator } from '../random/generator';
import { GELU, type GeluApproximation } from './gelu';
import { Linear } from './linear';

/** Options of MLP. */
export interface MLPOptions {
  /** Hidden width (default 4 · dModel). */
  hidden?: number;
  /** Default 'tanh' (GPT-2). */
  approximation?: GeluApproximation;
  generator?: Generator;
  /** Init std of the output projection (a GPT scales it by 1/√(2·nLayers)). */
  outputInitStd?: number;
}

/** The keys of MLPOptions ([Note: option keys] in @fsdp-ts/errors). */
const mLPOptionKeys = {
  hidden: true,
  approximation: true,
  generator: true,
  outputInitStd: true,
} as const satisfies OptionKeys<MLPOptions>;

/** Linear(dModel → hidden) → GELU → Linear(hidden → dModel). */
export class MLP extends Module {
  readonly inputProjection: Linear;
  readonly activation: GELU;
  readonly outputProjection: Linear;

  constructor(dModel: number, options: MLPOptions = {}) {
    super();
    checkNnOptionKeys('MLP', options, mLPOptionKeys);
    const hidden = options.hidden ?? 4 * dModel;
    const generator = options.generator === undefined ? {} : { generator: options.generator };
    this.inputProjection = this.registerModule('inputProjection', new Linear(dModel, hidden, generator));
    this.activation = this.registerModule('activation', new GELU(options.approximation ?? 'tanh'));
    this.outputProjection = this.registerModule(
      'outputProjection',
      new Linear(hidden, dModel, { ...generator, initStd: options.outputInitStd ?? GPT2_INIT_STD }),
    );
  }

  forward(x: tf.Tensor): tf.Tensor {
    return this.outputProjection.forward(this.activation.forward(this.inputProjection.forward(x)));
  }
}
