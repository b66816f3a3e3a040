import { FsdpError, type ShardingPreset, shardingPresets, shardingStrategies } from '@fsdp-ts/fsdp';
import { describe, expect, it } from 'vitest';
import { resolveShardingPreset, shardingSettings } from '../src/sharding-strategy';
import { keepGatheredRecompute } from './support/keep-gathered-recompute';

describe('sharding strategies are presets of settings', () => {
  it('every built-in name resolves to its preset; the default is full-shard', () => {
    for (const name of shardingStrategies) expect(resolveShardingPreset(name)).toBe(shardingPresets[name]);
    expect(resolveShardingPreset(undefined).name).toBe('full-shard');
  });

  it('a preset object is used as given, and its settings say what the runtime does', () => {
    expect(resolveShardingPreset(keepGatheredRecompute)).toBe(keepGatheredRecompute);
    expect(shardingSettings(keepGatheredRecompute, null)).toEqual({
      name: 'test-keep-gathered-recompute',
      gradientReduction: 'reduce-scatter',
      shardParameters: true,
      reshardAfterForward: false,
      recompute: true,
      replicateGroup: null,
    });
    expect(shardingSettings(shardingPresets['no-shard'], null).shardParameters).toBe(false);
  });

  it('unknown names and unsupported combinations fail with invalid-option and a fix', () => {
    const unsupported: ShardingPreset[] = [
      { ...shardingPresets['no-shard'], reshardAfterForward: true, recompute: true },
      { ...shardingPresets['no-shard'], replicate: true },
      { ...shardingPresets['full-shard'], recompute: 'yes' as never },
      { ...shardingPresets['full-shard'], name: '' },
      { ...shardingPresets['full-shard'], gradientReduction: 'broadcast' as never },
    ];
    for (const strategy of ['zero-3', ...unsupported] as const) {
      let caught: unknown;
      try {
        resolveShardingPreset(strategy as never);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(FsdpError);
      expect((caught as FsdpError).code).toBe('invalid-option');
      expect((caught as FsdpError).fix).toBeTruthy();
    }
  });
});
