import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { afterAll, describe, expect, it } from 'vitest';
import type { CheckpointArguments } from './fixtures/checkpoint-run';

const fixture = new URL('./fixtures/checkpoint-run.ts', import.meta.url);
const directory = join(mkdtempSync(join(tmpdir(), 'fsdp-layers-checkpoint-')), 'step-2');
afterAll(() => rmSync(join(directory, '..'), { recursive: true, force: true }));

describe('ShardedTrainer checkpoints', () => {
  it('resume at another world size and strategy exactly where training left off (Adam state included)', async () => {
    const run = async (worldSize: number, args: CheckpointArguments) =>
      (await spawnThreadRanks(worldSize, fixture, 'checkpointRank', {
        args,
        timeoutMs: 90_000,
      })) as number[][][];
    const [saved] = await run(2, { directory, strategy: 'full-shard', mode: 'save' });
    expect(readdirSync(directory).sort()).toEqual([
      'checkpoint.json',
      'model',
      'optimizer-rank-0.bin',
      'optimizer-rank-0.json',
      'optimizer-rank-1.bin',
      'optimizer-rank-1.json',
    ]);
    const resumed = await run(3, { directory, strategy: 'replicate', mode: 'resume' });
    for (const weights of resumed) {
      weights.forEach((values, weight) => {
        values.forEach((value, index) => {
          const expected = saved![weight]![index]!;
          // Stated tolerance: 1e-5 relative (floor 1e-2): only the summation order differs (W=3 vs W=2).
          expect(
            Math.abs(value - expected),
            `weight ${weight}[${index}]: ${value} vs ${expected}`,
          ).toBeLessThanOrEqual(1e-5 * Math.max(Math.abs(expected), 1e-2));
        });
      });
    }
  });
});
