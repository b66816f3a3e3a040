import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { describe, expect, it } from 'vitest';
import type { SummonEdgesReport } from './fixtures/summon-edges-rank';

const fixture = new URL('./fixtures/summon-edges-rank.ts', import.meta.url);

describe('summonFullParams and clipGradNorm at the edges (W=2, tiny GPT)', () => {
  for (const strategy of ['full-shard', 'shard-grad-op', 'no-shard'] as const) {
    it(`${strategy}: no stale gradients after zeroGrad, module.forward keeps the edit, clipGradNorm refuses pending noSync gradients`, async () => {
      const reports = (await spawnThreadRanks(2, fixture, 'summonEdgesRank', {
        args: strategy,
        timeoutMs: 90_000,
      })) as SummonEdgesReport[];
      for (const report of reports) {
        // 2 blocks × 12 + 2 embeddings + final norm (2) + lm head (tied or not): all trainable.
        expect(report.gradsBeforeZeroGrad).toBeGreaterThan(20);
        expect(report.gradsAfterZeroGrad).toBe(0);
        expect(report.innerForwardError).toBeNull();
        expect(report.innerForwardMatchesWrapper).toBe(true);
        expect(report.editKept).toBe(true);
        expect(report.clipDuringNoSync).toMatch(
          /^wrong-state: clipGradNorm\(\) was called while noSync gradients/,
        );
        expect(report.clipAfterSync).toBeGreaterThan(0);
      }
      if (strategy === 'no-shard') {
        // Every rank holds full parameters: rank0Only changes nothing for a forward.
        for (const report of reports) expect(report.rank0OnlyForward).toBe('ran');
      } else {
        expect(reports[0]!.rank0OnlyForward).toBe('ran');
        // Rank 1 holds shards only: the first layer that meets a shard says so (the embeddings of
        // the root unit here; a wrapped unit's forward would fail with 'wrong-state').
        expect(reports[1]!.rank0OnlyForward).toMatch(/is sharded \(its data has shape|holds only shards/);
      }
    }, 120_000);
  }
});
