import type { OptionKeys } from '@fsdp-ts/errors';
import * as tf from '@tensorflow/tfjs-core';
import { NnError } from '../errors';
import { checkNnOptionKeys } from '../internal/check-option-keys';
import { Module } from '../module';
import { Generator, type GeneratorState } from '../random/generator';
import type { RandomStateful } from '../random/random-state';

/** Options of Dropout. */
export interface DropoutOptions {
  /** Seed of this layer's own mask generator (default 0). Ignored when `generator` is given. */
  seed?: number;
  generator?: Generator;
}

/** The keys of DropoutOptions ([Note: option keys] in @fsdp-ts/errors). */
const dropoutOptionKeys = {
  seed: true,
  generator: true,
} as const satisfies OptionKeys<DropoutOptions>;

/**
 * In training mode, zeroes each element with probability `rate` and scales the rest by
 * 1 / (1 - rate); in eval mode (and at rate 0) returns its input unchanged.
 *
 * Masks come from the layer's own seeded Generator, so the same seed gives the same masks in
 * every process and on every backend. A caller that recomputes a forward (activation
 * recomputation) restores `getRandomState()` first to get the same masks again
 * ([Note: random-state protocol]).
 */
export class Dropout extends Module implements RandomStateful<GeneratorState> {
  readonly rate: number;
  readonly generator: Generator;

  constructor(rate: number, options: DropoutOptions = {}) {
    super();
    checkNnOptionKeys('Dropout', options, dropoutOptionKeys, {
      p: "torch.nn.Dropout's p is Dropout's first argument, the rate",
    });
    if (!(rate >= 0 && rate < 1)) {
      throw new NnError(`Dropout: rate ${rate} is out of range.`, {
        code: 'invalid-argument',
        expected: 'a rate in [0, 1)',
        actual: rate,
        fix: 'pass a probability such as 0.1.',
      });
    }
    this.rate = rate;
    this.generator = options.generator ?? new Generator(options.seed ?? 0);
  }

  /** The state of this layer's random generator. */
  getRandomState(): GeneratorState {
    return this.generator.getState();
  }

  /** Restores the state of this layer's random generator. */
  setRandomState(state: GeneratorState): void {
    this.generator.setState(state);
  }

  forward(x: tf.Tensor): tf.Tensor {
    if (!this.training || this.rate === 0) return x;
    const keep = 1 - this.rate;
    const mask = new Float32Array(x.size);
    for (let index = 0; index < mask.length; index++) {
      mask[index] = this.generator.uniform() < keep ? 1 / keep : 0;
    }
    return tf.mul(x, tf.tensor(mask, x.shape, 'float32'));
  }
}
