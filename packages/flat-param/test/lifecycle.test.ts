import { FlatParamError, FlatParamHandle } from '@fsdp-ts/flat-param';
import { Parameter, StorageFreedError, TensorView } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import { allGather } from './support/fixtures';

function linearRanks(worldSize: number) {
  return Array.from({ length: worldSize }, (_, rank) => {
    const weight = Parameter.fromArray([1, 2, 3, 4, 5, 6], [2, 3]);
    const bias = Parameter.fromArray([7, 8], [2]);
    const handle = FlatParamHandle.create(
      [
        ['linear.weight', weight],
        ['linear.bias', bias],
      ],
      { rank, worldSize },
    );
    return { weight, bias, handle };
  });
}

describe('state machine', () => {
  it('allows each transition only from the state it leaves, with a FlatParamError saying how to fix it', () => {
    const [{ handle }] = linearRanks(1) as [ReturnType<typeof linearRanks>[0]];
    expect(() => handle.useShardedViews()).toThrow(expect.objectContaining({ code: 'invalid-state' }));
    expect(() => handle.writeback()).toThrow(/needs state 'unsharded', but the unit is 'sharded'/);
    expect(() => handle.useUnshardedViews()).toThrow(/unsharded buffer, but it is freed/);
    allGather([handle]);
    handle.useUnshardedViews();
    expect(() => handle.useUnshardedViews()).toThrow(FlatParamError);
    expect(() => handle.freeUnsharded()).toThrow(/needs state 'sharded'/);
    handle.useShardedViews();
    handle.freeUnsharded();
    expect(handle.unshardedAllocated).toBe(false);
    expect(() => handle.unshardedView(0).toArray()).toThrow(StorageFreedError);
  });

  it('frees the gathered values while unsharded: the views throw until the next gather, then read it', () => {
    const [{ handle, weight }] = linearRanks(1) as [ReturnType<typeof linearRanks>[0]];
    expect(() => handle.freeUnshardedValues()).toThrow(/needs state 'unsharded'/);
    allGather([handle]);
    handle.useUnshardedViews();
    const view = weight.data;
    handle.freeUnshardedValues();
    expect(handle.state).toBe('unsharded');
    expect(handle.unshardedAllocated).toBe(false);
    expect(weight.data).toBe(view);
    expect(() => weight.data.toArray()).toThrow(StorageFreedError);
    handle.useShardedViews();
    handle.freeUnsharded();
    allGather([handle]);
    handle.useUnshardedViews();
    expect(weight.data).toBe(view);
    expect(weight.data.toArray()).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('keeps the same storage objects and views across free / re-allocate cycles', () => {
    const ranks = linearRanks(2);
    const handles = ranks.map((rank) => rank.handle);
    const views = handles.map((handle) => handle.unshardedView(0));
    for (let cycle = 0; cycle < 3; cycle++) {
      allGather(handles);
      for (const [rank, { handle, weight }] of ranks.entries()) {
        handle.useUnshardedViews();
        expect(weight.data).toBe(views[rank]);
        expect(weight.data.toArray()).toEqual([1, 2, 3, 4, 5, 6]);
        handle.useShardedViews();
        handle.freeUnsharded();
      }
    }
  });

  it('rejects a rank outside the world and a parameter already sharded elsewhere', () => {
    const weight = Parameter.fromArray([1, 2, 3, 4], [2, 2]);
    expect(() => FlatParamHandle.create([['w', weight]], { rank: 2, worldSize: 2 })).toThrow(/Rank 2/);
    const handle = FlatParamHandle.create([['w', weight]], { rank: 0, worldSize: 2 });
    expect(() => handle.shardedView(1)).toThrow(/No parameter at index 1: the unit has 1/);
    expect(() => handle.indexOf(Parameter.zeros([1]))).toThrow(/is not a parameter of this unit/);
    expect(() => handle.parameter('x')).toThrow(expect.objectContaining({ code: 'unknown-parameter' }));
    expect(() => FlatParamHandle.create([['w', weight]], { rank: 0, worldSize: 1 })).toThrow(
      expect.objectContaining({ code: 'not-full-shape', parameters: ['w'] }),
    );
  });
});

describe('gradients', () => {
  it('are null before any backward, then follow the rule in [Note: gradient views]', () => {
    const ranks = linearRanks(2);
    const handles = ranks.map((rank) => rank.handle);
    for (const { weight, bias } of ranks) expect([weight.grad, bias.grad]).toEqual([null, null]);
    allGather(handles);
    const [{ handle, weight, bias }] = ranks as [ReturnType<typeof linearRanks>[0]];
    handle.useUnshardedViews();
    expect(weight.grad).toBeNull();
    const flatGrad = handle.unshardedGradBuffer();
    expect(weight.grad!.shape).toEqual([2, 3]);
    expect(weight.grad!.storage).toBe(flatGrad.storage);
    handle.shardedGradBuffer().typedArray().set([0.5, 0.5, 0.5, 0.5]);
    handle.useShardedViews();
    expect(weight.grad).toBeNull(); // the sharded gradient is not declared present yet
    handle.setGradientsPresent(true);
    expect(weight.grad!.toArray()).toEqual([0.5, 0.5, 0.5, 0.5]);
    expect(bias.grad!.numel).toBe(0); // rank 0 holds none of the bias
    handle.freeUnshardedGrad();

    // zeroGrad(setToNone) by the user while sharded is noticed at the next unshard.
    weight.grad = null;
    handle.useUnshardedViews();
    handle.useShardedViews();
    expect(weight.grad).toBeNull();
    expect(handle.isGradientPresent(0)).toBe(false);
    expect(handle.isGradientPresent(1)).toBe(true);
    handle.setGradientsPresent(false);
    expect(bias.grad).toBeNull();
  });

  it('carries a gradient that existed before flattening into the sharded gradient', () => {
    const weight = Parameter.fromArray([1, 2, 3, 4], [2, 2]);
    const bias = Parameter.fromArray([5, 6], [2]);
    weight.grad = TensorView.fromArray([0.1, 0.2, 0.3, 0.4], [2, 2]);
    const handle = FlatParamHandle.create(
      [
        ['w', weight],
        ['b', bias],
      ],
      { rank: 1, worldSize: 2 },
    );
    expect(weight.grad!.toArray()).toEqual([Math.fround(0.4)]);
    expect(bias.grad).toBeNull();
    // Rank 1 holds flat [3, 6): weight element 3, then the bias (whose gradient stays zero).
    expect(handle.shardedGradBuffer().toArray()).toEqual([Math.fround(0.4), 0, 0]);
  });
});

describe('writeback', () => {
  it('copies edits of the full parameters back into each rank’s shard', () => {
    const ranks = linearRanks(2);
    const handles = ranks.map((rank) => rank.handle);
    allGather(handles);
    for (const { handle, weight, bias } of ranks) {
      handle.useUnshardedViews();
      weight.data.set([1, 2], 60);
      bias.data.fill(-1);
      handle.writeback();
      handle.useShardedViews();
      handle.freeUnsharded();
    }
    expect(ranks[0]!.weight.data.toArray()).toEqual([1, 2, 3, 4]);
    expect(ranks[1]!.weight.data.toArray()).toEqual([5, 60]);
    expect(ranks[1]!.bias.data.toArray()).toEqual([-1, -1]);
    allGather(handles);
    handles[0]!.useUnshardedViews();
    expect(ranks[0]!.weight.data.toArray()).toEqual([1, 2, 3, 4, 5, 60]);
  });
});

describe('edge cases FSDP meets', () => {
  it('handles a single-parameter unit at world size 1 (flattenParameters: false)', () => {
    const weight = Parameter.fromArray([1, 2, 3], [3]);
    const handle = FlatParamHandle.create([['only', weight]], { rank: 0, worldSize: 1, alignment: 16 });
    expect(handle.layout).toMatchObject({ totalNumel: 3, paddedNumel: 3, shardNumel: 3 });
    expect(weight.data.shape).toEqual([3]);
    handle.unshardedBuffer().typedArray().set(handle.shardedBuffer().typedArray());
    handle.useUnshardedViews();
    expect(weight.data.toArray()).toEqual([1, 2, 3]);
  });

  it('handles scalars, zero-size parameters, an empty unit, and ranks that hold nothing', () => {
    const scalar = Parameter.fromArray([42], []);
    const empty = Parameter.zeros([4, 0]);
    const handles = [0, 1, 2].map((rank) =>
      FlatParamHandle.create(
        [
          ['scale', rank === 0 ? scalar : Parameter.fromArray([42], [])],
          ['nothing', rank === 0 ? empty : Parameter.zeros([4, 0])],
        ],
        { rank, worldSize: 3 },
      ),
    );
    expect(handles[0]!.layout).toMatchObject({ totalNumel: 1, paddedNumel: 3, shardNumel: 1 });
    expect(scalar.data.shape).toEqual([1]);
    expect(empty.data.shape).toEqual([0]);
    expect(handles[2]!.parameters[0]!.data.numel).toBe(0);
    allGather(handles);
    handles[0]!.useUnshardedViews();
    expect(scalar.data.shape).toEqual([]);
    expect(scalar.data.get([])).toBe(42);
    expect(empty.data.shape).toEqual([4, 0]);

    const none = FlatParamHandle.create([], { rank: 1, worldSize: 2 });
    expect(none.layout.paddedNumel).toBe(0);
    none.unshardedBuffer();
    none.useUnshardedViews();
    none.useShardedViews();
    expect(none.state).toBe('sharded');
  });
});
