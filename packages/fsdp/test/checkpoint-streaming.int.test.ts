import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { afterAll, describe, expect, it } from 'vitest';
import type { StreamingResult } from './fixtures/streaming-checkpoint-rank';

const fixture = new URL('./fixtures/streaming-checkpoint-rank.ts', import.meta.url);
const work = mkdtempSync(join(tmpdir(), 'fsdp-streaming-int-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('checkpoints stream (no copy of the shards or the optimizer state)', () => {
  it('a checkpoint larger than every chunk saves without copying the state and loads in place, bit for bit', async () => {
    const results = (await spawnThreadRanks(2, fixture, 'streamingRank', {
      args: { root: work },
      timeoutMs: 120_000,
    })) as StreamingResult[];
    for (const result of results) {
      // Larger than the writer's chunk (8 MiB) and the reader's runs (8 MiB) several times over.
      expect(result.checkpointBytes).toBeGreaterThan(32 * 1024 ** 2);
      expect(result.restored).toBe(true);
      expect(result.sameArrays).toBe(true);
      // What the save and the load leave allocated (ArrayBuffers of this rank's thread) is at
      // most the reader's scratch (a run of 8 MiB for the verifying read and one for the read in
      // place) and a little more, less than this rank's optimizer state: a copy of it (the
      // previous code: 1× saving, 3× plus the shard loading) does not fit under the bound.
      const bound = 2 * 8 * 1024 ** 2 + 1024 ** 2;
      expect(result.stateBytes).toBeGreaterThan(bound);
      expect(result.saveGrowth, JSON.stringify(result)).toBeLessThan(bound);
      expect(result.loadGrowth, JSON.stringify(result)).toBeLessThan(bound);
    }
  }, 150_000);
});
