import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { estimateMemoryPerRank, memoryWarning, rankMemoryLimit } from '@fsdp-ts/fsdp';
import { describe, expect, it } from 'vitest';
import type { MemoryResult } from './fixtures/memory-estimate-rank';

const fixture = new URL('./fixtures/memory-estimate-rank.ts', import.meta.url);

describe('memory estimate against what the ranks really hold', () => {
  // 4-layer GPT, one unit per block, AdamW: estimate vs the measured peak of flat storages plus
  // optimizer state, within 10%.
  it.each([
    [1, ['full-shard']],
    [2, ['full-shard']],
    [3, ['full-shard', 'shard-grad-op', 'no-shard']],
  ] as const)('W=%i: %j within 10%%', async (worldSize, strategies) => {
    const perRank = (await spawnThreadRanks(worldSize, fixture, 'measureRank', {
      args: { strategies },
      timeoutMs: 300_000,
    })) as MemoryResult[][];
    for (const results of perRank) {
      results.forEach(({ estimate, measuredBytes }, index) => {
        const what = `${strategies[index]}: estimate ${estimate.totalBytes} vs measured ${measuredBytes}`;
        expect(measuredBytes).toBeGreaterThan(0);
        expect(estimate.totalBytes / measuredBytes, what).toBeGreaterThan(0.9);
        expect(estimate.totalBytes / measuredBytes, what).toBeLessThan(1.1);
      });
    }
  });
});

describe('memory warning', () => {
  const units = [
    { isRoot: true, paddedNumel: 1_000_000 },
    ...Array.from({ length: 8 }, () => ({ isRoot: false, paddedNumel: 10_000_000 })),
  ];

  it('follows the model 16·P/N + 8·(root + two largest units)', () => {
    const estimate = estimateMemoryPerRank({ units, worldSize: 4, strategy: 'full-shard' });
    expect(estimate.parametersBytes).toBe((4 * 81_000_000) / 4);
    expect(estimate.optimizerStateBytes).toBe((8 * 81_000_000) / 4);
    expect(estimate.gatheredBytes).toBe(8 * 21_000_000);
    expect(estimateMemoryPerRank({ units, worldSize: 4, strategy: 'no-shard' }).totalBytes).toBe(
      16 * 81_000_000,
    );
  });

  it('says nothing when the estimate fits, and names the budget and a fitting world size when not', () => {
    const estimate = estimateMemoryPerRank({ units, worldSize: 1, strategy: 'no-shard' });
    const limit = { bytes: 512 * 1024 ** 2, source: 'a test budget' };
    expect(
      memoryWarning(estimate, { bytes: 2 * 1024 ** 3, source: 'x' }, 'no-shard', 1, units),
    ).toBeUndefined();
    const warning = memoryWarning(estimate, limit, 'no-shard', 1, units);
    // 16·81M/N + 168M ≤ 512 MiB first at N = 4 (324 + 168 = 492 MB ≈ 469 MiB).
    expect(warning).toContain(
      "FSDP estimates 1236.0 MiB per rank for training with 'no-shard' at world size 1",
    );
    expect(warning).toContain('but this rank has 512.0 MiB (a test budget)');
    expect(warning).toContain("'full-shard' at a world size of 4 or more fits");
    const hopeless = memoryWarning(
      estimate,
      { bytes: 100 * 1024 ** 2, source: 'tiny' },
      'full-shard',
      1,
      units,
    );
    expect(hopeless).toContain('no full-shard world size fits');
  });

  it('is printed by the constructor under a budget set through FSDP_MEMORY_LIMIT_BYTES', async () => {
    const [warned] = (await spawnThreadRanks(1, fixture, 'warningRank', {
      timeoutMs: 300_000,
    })) as string[][];
    expect(warned).toHaveLength(1);
    expect(warned![0]).toContain("with 'full-shard' at world size 1");
    expect(warned![0]).toContain(
      'but this rank has 0.1 MiB (FSDP_MEMORY_LIMIT_BYTES (fsdp-run --memory-per-rank))',
    );
    expect(rankMemoryLimit({ FSDP_MEMORY_LIMIT_BYTES: '1024' })).toEqual({
      bytes: 1024,
      source: 'FSDP_MEMORY_LIMIT_BYTES (fsdp-run --memory-per-rank)',
    });
    expect(rankMemoryLimit({ LOCAL_WORLD_SIZE: '2' }).bytes).toBeGreaterThan(0);
  });
});
