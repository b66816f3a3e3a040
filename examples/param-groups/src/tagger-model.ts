import { Embedding, Generator, Linear, Module } from '@fsdp-ts/nn';
import * as tf from '@tensorflow/tfjs-core';

export const sizes = { vocab: 32, dimension: 16, hidden: 32, seqLen: 8 };

/**
 * A small token tagger: a frozen embedding, an encoder, a decoder and a head. Its submodules are
 * what the example hands to different optimizers after wrapping.
 */
export class TaggerModel extends Module {
  readonly embedding: Embedding;
  readonly encoder: Linear;
  readonly decoder: Linear;
  readonly head: Linear;

  constructor() {
    super();
    const generator = new Generator(11);
    const { vocab, dimension, hidden } = sizes;
    this.embedding = this.registerModule(
      'embedding',
      new Embedding(vocab, dimension, { generator, initStd: 0.5 }),
    );
    this.encoder = this.registerModule('encoder', new Linear(dimension, hidden, { generator, initStd: 0.2 }));
    this.decoder = this.registerModule('decoder', new Linear(hidden, dimension, { generator, initStd: 0.2 }));
    this.head = this.registerModule('head', new Linear(dimension, vocab, { generator, initStd: 0.2 }));
    for (const parameter of this.embedding.parameters()) parameter.requiresGrad = false; // frozen
  }

  forward(tokens: tf.Tensor): tf.Tensor {
    const embedded = this.embedding.forward(tokens);
    const hidden = tf.tanh(this.encoder.forward(embedded));
    return this.head.forward(tf.add(embedded, this.decoder.forward(hidden)));
  }
}

/** Sample `index` of step `step` (the same in every process): tag = (3·token + 1) mod vocab. */
export function samples(
  step: number,
  first: number,
  count: number,
): { tokens: tf.Tensor; targets: tf.Tensor } {
  const { vocab, seqLen } = sizes;
  const tokens: number[] = [];
  for (let index = first; index < first + count; index++) {
    let value = (step * 97 + index * 31 + 7) % vocab;
    for (let position = 0; position < seqLen; position++) {
      tokens.push(value);
      value = (value * 5 + position + 3) % vocab;
    }
  }
  return {
    tokens: tf.tensor2d(tokens, [count, seqLen], 'int32'),
    targets: tf.tensor2d(
      tokens.map((token) => (3 * token + 1) % vocab),
      [count, seqLen],
      'int32',
    ),
  };
}
