import { cpSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { afterAll, describe, expect, it } from 'vitest';
import type { CheckpointArguments, DamagedArguments, DamagedResult } from './fixtures/checkpoint-run';

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
    // The fixture saves twice into the same directory: the second save replaces the first
    // (commit by rename) and leaves no temporary or previous sibling.
    const [saved] = await run(2, { directory, strategy: 'full-shard', mode: 'save' });
    expect(readdirSync(join(directory, '..'))).toEqual(['step-2']);
    expect(readdirSync(directory).sort()).toEqual([
      'checkpoint.json',
      'model',
      'optimizer-rank-0.bin',
      'optimizer-rank-0.json',
      'optimizer-rank-1.bin',
      'optimizer-rank-1.json',
    ]);
    // A crash between the commit's two renames leaves only step-2.previous: it is loaded.
    renameSync(directory, `${directory}.previous`);
    const resumed = await run(3, { directory, strategy: 'replicate', mode: 'resume' });
    renameSync(`${directory}.previous`, directory);
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

  it('refuses a damaged checkpoint on every rank, naming the file, before changing anything', async () => {
    const damage: [string, (path: string) => void][] = [
      ['optimizer-rank-1.bin', flipByte],
      ['model/weights.bin', flipByte],
      ['optimizer-rank-0.json', flipByte],
      [
        'checkpoint.json',
        (path) => writeFileSync(path, readFileSync(path, 'utf8').replace('"numel":16', '"numel":17')),
      ],
    ];
    const directories = damage.map(([file, apply], index) => {
      const copy = join(directory, '..', `damaged-${index}`);
      cpSync(directory, copy, { recursive: true });
      apply(join(copy, file));
      return copy;
    });
    const args: DamagedArguments = { directories };
    const ranks = (await spawnThreadRanks(2, fixture, 'damagedRank', {
      args,
      timeoutMs: 90_000,
    })) as DamagedResult[];
    for (const result of ranks) {
      expect(result.unchanged).toBe(true);
      damage.forEach(([file], index) => {
        expect(result.errors[index]).toMatch(/^checkpoint-corrupt: Checkpoint file .* is damaged/);
        expect(result.errors[index]).toContain(join(directories[index]!, file));
      });
    }
  });
});

function flipByte(path: string): void {
  const bytes = readFileSync(path);
  bytes[Math.floor(bytes.length / 2)]! ^= 0x10;
  writeFileSync(path, bytes);
}
