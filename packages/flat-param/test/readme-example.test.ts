import { FlatParamHandle } from '@fsdp-ts/flat-param';
import { Parameter } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';

describe('README example', () => {
  it('runs as written', () => {
    const weight = Parameter.fromArray([1, 2, 3, 4, 5, 6], [2, 3]);
    const bias = Parameter.fromArray([7, 8], [2]);
    const handle = FlatParamHandle.create(
      [
        ['layer.weight', weight],
        ['layer.bias', bias],
      ],
      { rank: 0, worldSize: 1 },
    );
    expect(weight.data.shape).toEqual([6]);
    expect(handle.shardedBuffer().storage.shared).toBe(true);
    handle.unshardedBuffer().typedArray().set(handle.shardedBuffer().typedArray());
    handle.useUnshardedViews();
    expect(weight.data.shape).toEqual([2, 3]);
    expect(weight.data.toArray()).toEqual([1, 2, 3, 4, 5, 6]);
    expect(handle.parameter('layer.weight')).toBe(weight);
    handle.useShardedViews();
    handle.freeUnsharded();
    expect(handle.state).toBe('sharded');
  });
});
