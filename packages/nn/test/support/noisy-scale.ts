import { Parameter } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { Generator, type GeneratorState, initNormal, Module, type RandomStateful } from '../../src/index';

/**
 * A test-only layer, added through CONTRIBUTING's "add a layer" recipe and used by the nn layer
 * tests and FSDP's recompute test: y = x · scale + std · noise, with a learned per-feature
 * `scale` (initialised around 1 from a Generator) and, in training mode, Gaussian noise from the
 * layer's own seeded Generator. It is random without being a Dropout, so it implements the
 * random-state protocol ([Note: random-state protocol]) for recomputation to replay its noise.
 */
export class NoisyScale extends Module implements RandomStateful<GeneratorState> {
  readonly scale: Parameter;
  readonly std: number;
  readonly noise: Generator;

  constructor(features: number, options: { std?: number; seed?: number; init?: Generator } = {}) {
    super();
    this.std = options.std ?? 0.1;
    this.noise = new Generator(options.seed ?? 0);
    this.scale = this.registerParameter('scale', Parameter.zeros([features]));
    initNormal(this.scale.data, 0.1, options.init ?? new Generator(1));
    const values = this.scale.data.typedArray() as Float32Array;
    for (let index = 0; index < values.length; index++) values[index]! += 1;
  }

  forward(x: tf.Tensor): tf.Tensor {
    const scaled = tf.mul(x, this.tensor(this.scale));
    if (!this.training || this.std === 0) return scaled;
    const noise = new Float32Array(x.size);
    for (let index = 0; index < noise.length; index++) noise[index] = this.std * this.noise.normal();
    return tf.add(scaled, tf.tensor(noise, x.shape, 'float32'));
  }

  getRandomState(): GeneratorState {
    return this.noise.getState();
  }

  setRandomState(state: GeneratorState): void {
    this.noise.setState(state);
  }
}
