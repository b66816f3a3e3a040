import { TensorView } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  deferredInit,
  Embedding,
  Generator,
  GPT,
  type GPTConfig,
  LayerNorm,
  Linear,
  type Module,
  materializeParameters,
  NnError,
  NormalInitializer,
} from '../src/index';
import { useBackend } from './support/fixtures';

const config: GPTConfig = { vocabSize: 11, dModel: 12, nLayers: 3, nHeads: 2, seqLen: 5, seed: 7 };

function bits(module: Module): Map<string, Uint32Array> {
  return new Map(
    module
      .namedParameters()
      .map(([name, parameter]) => [
        name,
        new Uint32Array(Float32Array.from(parameter.data.toArray()).buffer),
      ]),
  );
}

describe('Generator.skipNormals', () => {
  it('leaves the generator where that many normal() calls would, spare included', () => {
    fc.assert(
      fc.property(
        fc.integer(),
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 0, max: 300 }),
        (seed, warm, count) => {
          const drawn = new Generator(seed);
          const skipped = new Generator(seed);
          for (let index = 0; index < warm; index++) {
            drawn.normal();
            skipped.normal();
          }
          for (let index = 0; index < count; index++) drawn.normal();
          skipped.skipNormals(count);
          expect(skipped.getState()).toEqual(drawn.getState());
          expect(skipped.normal()).toBe(drawn.normal());
        },
      ),
    );
  });
});

describe('deferredInit', () => {
  beforeAll(async () => {
    await useBackend('cpu');
  });

  it.each([true, false])(
    'a GPT (tied embeddings: %s) materialises bit for bit as eager construction',
    (tieEmbeddings) => {
      const eager = new GPT({ ...config, tieEmbeddings });
      const deferred = deferredInit(() => new GPT({ ...config, tieEmbeddings }));
      const parameters = deferred.parameters();
      expect(parameters.every((parameter) => parameter.isDeferred)).toBe(true);
      expect(parameters.every((parameter) => !parameter.data.storage.isAllocated)).toBe(true);
      expect(deferred.lmHead.weight === deferred.tokenEmbedding.weight).toBe(tieEmbeddings);
      expect(deferred.namedParameters().map(([name]) => name)).toEqual(
        eager.namedParameters().map(([name]) => name),
      );
      materializeParameters(deferred);
      expect(bits(deferred)).toEqual(bits(eager));
    },
  );

  it('any range of a parameter equals the same range of its eager values', () => {
    const eager = new GPT(config);
    const deferred = deferredInit(() => new GPT(config));
    const pairs = eager
      .parameters()
      .map((parameter, index) => [parameter, deferred.parameters()[index]!] as const);
    fc.assert(
      fc.property(fc.nat(pairs.length - 1), fc.nat(), fc.nat(), (which, a, b) => {
        const [reference, lazy] = pairs[which]!;
        const start = a % reference.numel;
        const length = b % (reference.numel - start + 1);
        const target = TensorView.zeros([length]);
        lazy.copyValuesInto(target, start);
        expect(lazy.isDeferred).toBe(true);
        const expected = reference.data.flatten().narrow(0, start, length).toArray();
        expect(Array.from(target.typedArray())).toEqual(expected);
      }),
    );
  });

  it('leaves a shared generator where eager construction leaves it', () => {
    const eagerGenerator = new Generator(3);
    const deferredGenerator = new Generator(3);
    new Linear(7, 5, { generator: eagerGenerator });
    new Embedding(3, 5, { generator: eagerGenerator });
    const deferred = deferredInit(
      () =>
        [
          new Linear(7, 5, { generator: deferredGenerator }),
          new Embedding(3, 5, { generator: deferredGenerator }),
        ] as const,
    );
    expect(deferredGenerator.getState()).toEqual(eagerGenerator.getState());
    expect(deferred[0].weight.initializer).toBeInstanceOf(NormalInitializer);
    expect(deferred[0].bias!.initializer!.description).toBe('constant(0)');
  });

  it('is off outside the scope, and a bfloat16 target gets the eager values converted', () => {
    const norm = new LayerNorm(4);
    expect(norm.weight.isDeferred).toBe(false);
    const eager = new Linear(3, 2, { generator: new Generator(1) });
    const lazy = deferredInit(() => new Linear(3, 2, { generator: new Generator(1) }));
    const target = TensorView.zeros([6], 'bfloat16');
    lazy.weight.initializer!.fill(target, 0);
    const expected = TensorView.zeros([6], 'bfloat16').copyFrom(eager.weight.data.flatten());
    expect(target.toArray()).toEqual(expected.toArray());
  });

  it('forward on a deferred model names the fix; loadStateDict makes the values first', () => {
    const model = deferredInit(() => new Linear(3, 2));
    expect(() => tf.tidy(() => model.forward(tf.ones([1, 3])))).toThrow(NnError);
    expect(() => tf.tidy(() => model.forward(tf.ones([1, 3])))).toThrow(/materializeParameters/);
    const source = new Linear(3, 2, { generator: new Generator(9) });
    model.loadStateDict({ weight: source.weight.data }, { strict: false });
    expect(model.weight.data.toArray()).toEqual(source.weight.data.toArray());
    expect(model.bias!.data.toArray()).toEqual([0, 0]);
    expect(model.parameters().some((parameter) => parameter.isDeferred)).toBe(false);
  });
});
