import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { describe, expect, it } from 'vitest';
import type { DeferredCase, DeferredReport } from './fixtures/deferred-wrap-rank';

const fixture = new URL('./fixtures/deferred-wrap-rank.ts', import.meta.url);

const cases: DeferredCase[] = [
  { strategy: 'full-shard', tieEmbeddings: true },
  { strategy: 'full-shard', tieEmbeddings: false },
  { strategy: 'no-shard', tieEmbeddings: true },
];

describe('deferred initialisation under FSDP (nn deferredInit, values made while flattening)', () => {
  it.each([1, 2, 3])(
    'W=%i: every rank holds the bits eager construction gives, and nothing beyond its shards was made',
    async (worldSize) => {
      const perRank = (await spawnThreadRanks(worldSize, fixture, 'deferredWrapRank', {
        args: { cases },
        timeoutMs: 120_000,
      })) as DeferredReport[][];
      for (const [rank, reports] of perRank.entries()) {
        for (const report of reports) {
          const what = `rank ${rank} ${report.strategy} tied=${report.tieEmbeddings}`;
          expect(report.elements, what).toBeGreaterThan(0);
          expect(report.differingBits, what).toBe(0);
          expect(report.allocatedOriginals, what).toBe(0);
          expect(report.deferredAfterWrap, what).toBe(0);
          expect(report.lossDeferred, what).toBe(report.lossEager);
        }
      }
    },
  );
});
