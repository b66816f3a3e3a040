import { FlatParamError, FlatParamHandle, locateParameterRange } from '@fsdp-ts/flat-param';
import { Parameter } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import { allGather, handlesPerRank, reduceScatter } from './support/fixtures';

function tiedModel() {
  const embedding = Parameter.fromArray([1, 2, 3, 4, 5, 6], [3, 2]);
  const norm = Parameter.fromArray([7, 8], [2]);
  const named: [string, Parameter][] = [
    ['embedding.weight', embedding],
    ['norm.weight', norm],
    ['head.weight', embedding],
  ];
  return { embedding, norm, named };
}

describe('tied parameters', () => {
  it('occupy the layout once and resolve under both names', () => {
    const ranks = [tiedModel(), tiedModel()];
    const handles = handlesPerRank(ranks.map((model) => model.named));
    const handle = handles[0]!;
    expect(handle.layout.totalNumel).toBe(8);
    expect(handle.parameters).toHaveLength(2);
    expect(handle.layout.parameters[0]!.names).toEqual(['embedding.weight', 'head.weight']);
    expect(handle.parameter('head.weight')).toBe(ranks[0]!.embedding);
    expect(handle.parameter('embedding.weight')).toBe(ranks[0]!.embedding);
    expect(handle.indexOf('head.weight')).toBe(handle.indexOf(ranks[0]!.embedding));
    expect(handle.namedParameters().map(([name]) => name)).toEqual([
      'embedding.weight',
      'norm.weight',
      'head.weight',
    ]);
    expect(handle.metadata().parameters.map((parameter) => parameter.names)).toEqual([
      ['embedding.weight', 'head.weight'],
      ['norm.weight'],
    ]);
    expect(locateParameterRange(handle.metadata(), 'head.weight')).toEqual(
      locateParameterRange(handle.metadata(), 'embedding.weight'),
    );
    allGather(handles);
    handle.useUnshardedViews();
    expect(ranks[0]!.embedding.data.toArray()).toEqual([1, 2, 3, 4, 5, 6]);
  });
});

describe('frozen parameters', () => {
  function frozenRanks() {
    return [0, 1].map((rank) => {
      const frozen = Parameter.fromArray([1, 2, 3, 4], [2, 2], { requiresGrad: false });
      const trainable = Parameter.fromArray([5, 6, 7], [3]);
      const handle = FlatParamHandle.create(
        [
          ['frozen', frozen],
          ['trainable', trainable],
        ],
        { rank, worldSize: 2 },
      );
      return { frozen, trainable, handle };
    });
  }

  it('never expose a gradient, keep their gradient range zero, and are reported as frozen', () => {
    const ranks = frozenRanks();
    const handles = ranks.map((rank) => rank.handle);
    expect(handles[0]!.metadata().parameters.map((parameter) => parameter.frozen)).toEqual([true, false]);
    allGather(handles);
    for (const { handle, frozen, trainable } of ranks) {
      handle.useUnshardedViews();
      handle.unshardedGradBuffer();
      expect(frozen.grad).toBeNull();
      expect(handle.unshardedGradView(0)).toBeNull();
      trainable.grad!.fill(1);
    }
    reduceScatter(handles);
    for (const { handle, frozen, trainable } of ranks) {
      // Frozen range of the unsharded gradient: untouched zeros.
      expect(handle.unshardedGradBuffer().toArray()).toEqual([0, 0, 0, 0, 1, 1, 1, 0]);
      handle.setGradientsPresent(true);
      handle.useShardedViews();
      expect(frozen.grad).toBeNull();
      expect(handle.isGradientPresent(0)).toBe(false);
      expect(trainable.grad!.toArray().every((value) => value === 2)).toBe(true);
    }
    // Rank 0 holds elements 0..4 (all frozen) and rank 1 the trainable ones.
    expect(handles[0]!.shardedGradBuffer().toArray()).toEqual([0, 0, 0, 0]);
    expect(handles[1]!.shardedGradBuffer().toArray()).toEqual([2, 2, 2, 0]);
  });
});

describe('dtypes', () => {
  it('rejects a unit mixing dtypes, naming the offending parameters', () => {
    const named: [string, Parameter][] = [
      ['a.weight', Parameter.zeros([2])],
      ['b.weight', Parameter.zeros([2], { dtype: 'bfloat16' })],
      ['c.weight', Parameter.zeros([3])],
    ];
    const create = () => FlatParamHandle.create(named, { rank: 0, worldSize: 1 });
    expect(create).toThrow(FlatParamError);
    expect(create).toThrow(expect.objectContaining({ code: 'dtype-mismatch', parameters: ['b.weight'] }));
    expect(create).toThrow(/float32: a\.weight, c\.weight; bfloat16: b\.weight/);
    // Nothing was re-pointed by the failed call.
    expect(named[0]![1].data.shape).toEqual([2]);
    expect(named[0]![1].data.storage.shared).toBe(false);
  });

  it('flattens bfloat16 parameters word for word, with float32 gradient buffers on request', () => {
    const parameter = Parameter.fromArray([1.5, -2, 0.25], [3], { dtype: 'bfloat16' });
    const words = Array.from(parameter.data.typedArray());
    const handle = FlatParamHandle.create([['p', parameter]], {
      rank: 0,
      worldSize: 1,
      gradDType: 'float32',
    });
    expect(handle.layout.dtype).toBe('bfloat16');
    expect(Array.from(handle.shardedBuffer().typedArray())).toEqual(words);
    expect(handle.shardedGradBuffer().dtype).toBe('float32');
    expect(parameter.data.toArray()).toEqual([1.5, -2, 0.25]);
  });
});
