import type { ProcessGroup } from '@fsdp-ts/collectives';
import { describe, expect, it } from 'vitest';
import { FsdpError } from '../src/errors';
import { resolveHybridGroups } from '../src/hybrid-shard';
import { resolveMixedPrecision } from '../src/mixed-precision';
import { checkNames } from '../src/state-dict/check-names';

// Option resolution never touches the groups' methods: plain stand-ins are enough here.
const someGroup = {} as ProcessGroup;

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(FsdpError);
    return `${(error as FsdpError).code}: ${(error as Error).message}`;
  }
  return 'no error';
}

describe('mixed precision options', () => {
  it('defaults reduceDtype to paramDtype and treats float32/float32 as off', () => {
    expect(resolveMixedPrecision({ paramDtype: 'bfloat16' })).toEqual({
      paramDtype: 'bfloat16',
      reduceDtype: 'bfloat16',
    });
    expect(resolveMixedPrecision({ reduceDtype: 'bfloat16' })).toEqual({
      paramDtype: 'float32',
      reduceDtype: 'bfloat16',
    });
    expect(resolveMixedPrecision({})).toBeNull();
    expect(resolveMixedPrecision(undefined)).toBeNull();
  });
  it('rejects other dtypes, naming the field', () => {
    const message = codeOf(() => resolveMixedPrecision({ paramDtype: 'float16' as 'bfloat16' }));
    expect(message).toMatch(/^invalid-option: mixedPrecision.paramDtype "float16"/);
  });
});

describe('hybrid-shard options', () => {
  it('returns the two groups', () => {
    const replicateGroup = {} as ProcessGroup;
    expect(
      resolveHybridGroups({ shardingStrategy: 'hybrid-shard', shardGroup: someGroup, replicateGroup }),
    ).toEqual({
      shardGroup: someGroup,
      replicateGroup,
    });
    expect(resolveHybridGroups({ group: someGroup })).toBeNull();
  });
  it('points shardGroupSize at the async create()', () => {
    expect(
      codeOf(() =>
        resolveHybridGroups({ group: someGroup, shardingStrategy: 'hybrid-shard', shardGroupSize: 2 }),
      ),
    ).toMatch(/^invalid-option: .*FullyShardedDataParallel\.create/);
  });
  it('rejects hybrid options with another strategy, and hybrid without groups', () => {
    expect(codeOf(() => resolveHybridGroups({ group: someGroup, shardGroupSize: 2 }))).toMatch(
      /^invalid-option: shardGroupSize only apply/,
    );
    expect(codeOf(() => resolveHybridGroups({ group: someGroup, shardingStrategy: 'hybrid-shard' }))).toMatch(
      /^invalid-option: 'hybrid-shard' needs its two groups/,
    );
  });
});

describe('state dict helpers', () => {
  it('checkNames names every missing, unexpected and misshapen entry at once', () => {
    const expected = new Map<string, number[]>([
      ['a', [2]],
      ['b', [3, 4]],
      ['c', [1]],
    ]);
    const actual = new Map<string, number[]>([
      ['b', [4, 3]],
      ['d', [1]],
      ['tied', [2]],
    ]);
    const message = codeOf(() => checkNames('load', expected, new Map([['tied', [2]]]), actual));
    expect(message).toMatch(
      /^state-dict-mismatch: load: .*missing a, c; unexpected d; b has shape \[4, 3\], expected \[3, 4\]/,
    );
    expect(() => checkNames('load', expected, new Map(), new Map(expected))).not.toThrow();
  });
});
