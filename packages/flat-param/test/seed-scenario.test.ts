import { Parameter } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import { allGather, handlesPerRank, reduceScatter } from './support/fixtures';

/** A hand-built stand-in for nn's Module: `layer` is a Linear 5×5 (weight [5, 5], bias [5]). */
function makeModel(seed: number) {
  const values = (count: number, scale: number) =>
    Array.from({ length: count }, (_, index) => Math.fround(Math.sin(seed + index * scale)));
  const layer = {
    weight: Parameter.fromArray(values(25, 0.37), [5, 5], { name: 'layer.weight' }),
    bias: Parameter.fromArray(values(5, 1.91), [5], { name: 'layer.bias' }),
  };
  return {
    layer,
    namedParameters: (): [string, Parameter][] => [
      ['layer.weight', layer.weight],
      ['layer.bias', layer.bias],
    ],
  };
}

const gradients = {
  // Rank r's local gradient; the reduce-scatter sums them, as FSDP does before averaging.
  weight: (rank: number) => Array.from({ length: 25 }, (_, index) => Math.fround(0.01 * (index - 12) + rank)),
  bias: (rank: number) => Array.from({ length: 5 }, (_, index) => Math.fround(0.1 * index - rank)),
};

describe('seed scenario: Linear 5×5 flattened for 2 ranks', () => {
  it('keeps the same Parameter objects, holds all 30 values across ranks, and an SGD step matches the unflattened one', () => {
    const _worldSize = 2;
    const learningRate = 0.1;
    const models = [makeModel(1), makeModel(1)];
    const reference = makeModel(1);
    const originals = models.map((model) => [model.layer.weight, model.layer.bias]);
    const handles = handlesPerRank(models.map((model) => model.namedParameters()));

    // Same objects, now 1-D views of each rank's shard.
    models.forEach((model, rank) => {
      expect(model.layer.weight).toBe(originals[rank]![0]);
      expect(handles[rank]!.parameter('layer.bias')).toBe(model.layer.bias);
      expect(model.layer.weight.shape).toEqual([5, 5]);
    });
    expect(handles[0]!.layout).toMatchObject({ totalNumel: 30, paddedNumel: 30, shardNumel: 15 });
    // Rank 0 holds weight[0..15); rank 1 holds weight[15..25) and the whole bias.
    expect(models[0]!.layer.weight.data.numel).toBe(15);
    expect(models[0]!.layer.bias.data.numel).toBe(0);
    expect(models[1]!.layer.weight.data.numel).toBe(10);
    expect(models[1]!.layer.bias.data.numel).toBe(5);
    const together = [
      ...models[0]!.layer.weight.data.toArray(),
      ...models[1]!.layer.weight.data.toArray(),
      ...models[0]!.layer.bias.data.toArray(),
      ...models[1]!.layer.bias.data.toArray(),
    ];
    expect(together).toEqual([
      ...reference.layer.weight.data.toArray(),
      ...reference.layer.bias.data.toArray(),
    ]);

    // Backward: gather, each rank's autograd writes full-shape gradients through Parameter.grad.
    allGather(handles);
    handles.forEach((handle, rank) => {
      expect(models[rank]!.layer.weight.grad).toBeNull();
      handle.useUnshardedViews();
      handle.unshardedGradBuffer();
      models[rank]!.layer.weight.grad!.typedArray().set(gradients.weight(rank));
      models[rank]!.layer.bias.grad!.typedArray().set(gradients.bias(rank));
    });
    reduceScatter(handles);
    for (const handle of handles) {
      handle.setGradientsPresent(true);
      handle.useShardedViews();
      handle.freeUnshardedGrad();
      handle.freeUnsharded();
    }

    // The optimizer sees only Parameters: p -= lr * g on whatever part each rank holds.
    for (const model of models) {
      for (const parameter of [model.layer.weight, model.layer.bias]) {
        const data = parameter.data.typedArray();
        const grad = parameter.grad!.typedArray();
        expect(grad.length).toBe(data.length);
        for (let index = 0; index < data.length; index++) data[index]! -= learningRate * grad[index]!;
      }
    }
    // Reference: the same step on the unflattened parameters with the summed gradient.
    const step = (parameter: Parameter, grad: (rank: number) => number[]) => {
      const data = parameter.data.typedArray();
      const [first, second] = [grad(0), grad(1)];
      for (let index = 0; index < data.length; index++) {
        data[index]! -= learningRate * Math.fround(first[index]! + second[index]!);
      }
    };
    step(reference.layer.weight, gradients.weight);
    step(reference.layer.bias, gradients.bias);

    allGather(handles);
    handles.forEach((handle, rank) => {
      handle.useUnshardedViews();
      // Same float32 operations in the same order on both sides: exact equality.
      expect(models[rank]!.layer.weight.data.toArray()).toEqual(reference.layer.weight.data.toArray());
      expect(models[rank]!.layer.bias.data.toArray()).toEqual(reference.layer.bias.data.toArray());
      expect(models[rank]!.layer.weight).toBe(originals[rank]![0]);
    });
  });
});
