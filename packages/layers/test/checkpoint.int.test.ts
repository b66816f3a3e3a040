import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { afterAll, describe, expect, it } from 'vitest';
import type {
  CheckpointArguments,
  CheckpointResult,
  DamagedArguments,
  DamagedResult,
  FsdpReadResult,
} from './fixtures/checkpoint-run';

const fixture = new URL('./fixtures/checkpoint-run.ts', import.meta.url);
const work = mkdtempSync(join(tmpdir(), 'fsdp-layers-checkpoint-'));
const directory = join(work, 'mlp');
const step = join(directory, 'step-00000002');
afterAll(() => rmSync(work, { recursive: true, force: true }));

const run = async (worldSize: number, args: CheckpointArguments) =>
  (await spawnThreadRanks(worldSize, fixture, 'checkpointRank', {
    args,
    timeoutMs: 90_000,
  })) as CheckpointResult[];

const readWithFsdp = async (root: string) =>
  (
    (await spawnThreadRanks(1, fixture, 'fsdpReadRank', {
      args: { directory: root },
      timeoutMs: 60_000,
    })) as FsdpReadResult[]
  )[0]!;

/** Stated tolerance: 1e-5 relative (floor 1e-2): only the summation order differs between world sizes. */
function expectClose(actual: number[][], expected: number[][]): void {
  expect(actual.length).toBe(expected.length);
  actual.forEach((values, weight) => {
    values.forEach((value, index) => {
      const reference = expected[weight]![index]!;
      expect(
        Math.abs(value - reference),
        `weight ${weight}[${index}]: ${value} vs ${reference}`,
      ).toBeLessThanOrEqual(1e-5 * Math.max(Math.abs(reference), 1e-2));
    });
  });
}

describe('ShardedTrainer checkpoints (the @fsdp-ts/fsdp format)', () => {
  it('resume at another world size and strategy exactly where training left off (Adam state included), and read with fsdp', async () => {
    // The fixture saves twice at step 2: the second save replaces the first (commit by rename)
    // and leaves no temporary or aside copy.
    const [saved] = await run(2, { directory, strategy: 'full-shard', mode: 'save' });
    expect(saved!.steps).toBe(2);
    expect(readdirSync(directory).sort()).toEqual(['latest', 'step-00000002']);
    expect(readdirSync(step).sort()).toEqual([
      'metadata.json',
      'replicated-state.bin',
      'shard-00000-of-00002.bin',
      'shard-00000-of-00002.json',
      'shard-00001-of-00002.bin',
      'shard-00001-of-00002.json',
    ]);
    // fsdp's own reader (world size 1, described from metadata.json) sees the same weights.
    const read = await readWithFsdp(directory);
    expect(read.documents).toEqual(['layers/model.json', 'layers/trainer']);
    expect(read.topologyClassName).toBe('Sequential');
    expect(Object.keys(read.parameters).sort()).toEqual(
      saved!.atCheckpoint.map((_, index) => `trainable/${index}`).sort(),
    );
    saved!.atCheckpoint.forEach((values, index) => {
      expect(read.parameters[`trainable/${index}`], `trainable/${index}`).toEqual(values);
    });
    // A crash of a re-save between its two renames leaves the old step only moved aside: it is loaded.
    renameSync(step, join(directory, '.old-step-00000002-7'));
    const resumed = await run(3, { directory, strategy: 'replicate', mode: 'resume' });
    renameSync(join(directory, '.old-step-00000002-7'), step);
    for (const result of resumed) {
      expect(result.steps).toBe(2);
      expect(result.atCheckpoint).toEqual(saved!.atCheckpoint);
      expectClose(result.final, saved!.final);
    }
  });

  it('keeps the batch-norm moving statistics (non-trainable weights) through a save at W=2 and a load at W=3', async () => {
    const root = join(work, 'cnn');
    const [saved] = await run(2, { directory: root, strategy: 'shard-gradients', mode: 'save', kind: 'cnn' });
    const read = await readWithFsdp(root);
    // conv kernel, gamma, beta, dense kernel, dense bias; then moving mean and moving variance.
    const trainable = Object.keys(read.parameters).length;
    expect(Object.keys(read.buffers).sort()).toEqual(['non-trainable/0', 'non-trainable/1']);
    const [movingMean, movingVariance] = [
      saved!.atCheckpoint[trainable]!,
      saved!.atCheckpoint[trainable + 1]!,
    ];
    // Training moved them away from their initial zeros and ones, so the round trip is not trivial.
    expect(movingMean.some((value) => value !== 0)).toBe(true);
    expect(movingVariance.some((value) => value !== 1)).toBe(true);
    expect(read.buffers['non-trainable/0']).toEqual(movingMean);
    expect(read.buffers['non-trainable/1']).toEqual(movingVariance);
    const resumed = await run(3, { directory: root, strategy: 'full-shard', mode: 'resume', kind: 'cnn' });
    for (const result of resumed) {
      expect(result.atCheckpoint).toEqual(saved!.atCheckpoint);
      expectClose(result.final, saved!.final);
    }
  });

  it('refuses a damaged checkpoint on every rank, naming the file, before changing anything', async () => {
    const damage: [string, (path: string) => void][] = [
      ['shard-00001-of-00002.bin', flipByte],
      ['shard-00000-of-00002.json', flipByte],
      ['replicated-state.bin', flipByte],
      [
        'metadata.json',
        (path) => writeFileSync(path, readFileSync(path, 'utf8').replace('"numel": 16', '"numel": 17')),
      ],
    ];
    const directories = damage.map(([file, apply], index) => {
      const copy = join(work, `damaged-${index}`);
      cpSync(step, copy, { recursive: true });
      apply(join(copy, file));
      return copy;
    });
    // The edit above must have changed metadata.json (else the case would test nothing).
    expect(readFileSync(join(directories[3]!, 'metadata.json'), 'utf8')).toContain('"numel": 17');
    const args: DamagedArguments = { directories };
    const ranks = (await spawnThreadRanks(2, fixture, 'damagedRank', {
      args,
      timeoutMs: 90_000,
    })) as DamagedResult[];
    damage.forEach(([file], index) => {
      const path = join(directories[index]!, file);
      const errors = ranks.map((result) => result.errors[index]!);
      // The rank that found the damage says so; the other learns which rank and which file.
      expect(
        errors.some((error) => error.startsWith(`checkpoint-corrupt: Checkpoint file ${path} is damaged`)),
        errors.join('\n'),
      ).toBe(true);
      for (const error of errors) {
        expect(error).toMatch(/^checkpoint-(corrupt|failed): /);
        expect(error).toContain(path);
      }
    });
    for (const result of ranks) expect(result.unchanged).toBe(true);
  });

  it('says a checkpoint of the old layers format is one (not missing), what this version reads, and how to convert it', async () => {
    // The layout @fsdp-ts/layers wrote before it used fsdp's format (commits 2b7556c to 21cb603^,
    // [Note: layers checkpoints of the old format]): files as its checkpoint-files.ts named them.
    const writeOldLayout = (root: string, format: string) => {
      mkdirSync(join(root, 'model'), { recursive: true });
      writeFileSync(
        join(root, 'model', 'model.json'),
        JSON.stringify({ modelTopology: {}, weightsManifest: [] }),
      );
      writeFileSync(join(root, 'model', 'weights.bin'), new Uint8Array(16));
      for (const rank of [0, 1]) {
        writeFileSync(join(root, `optimizer-rank-${rank}.json`), JSON.stringify({ rank, entries: [] }));
        writeFileSync(join(root, `optimizer-rank-${rank}.bin`), new Uint8Array(0));
      }
      const index = {
        format,
        worldSize: 2,
        strategy: 'shard-gradients',
        optimizer: 'adam',
        paramGroups: [],
        parameters: [],
        files: {},
        digest: '',
      };
      writeFileSync(join(root, 'checkpoint.json'), JSON.stringify(index));
    };
    const old = join(work, 'old-format');
    writeOldLayout(old, 'fsdp-ts/layers-checkpoint@2');
    // A crash between the old commit's two renames left only `<dir>.previous`.
    const crashed = join(work, 'old-crashed');
    writeOldLayout(`${crashed}.previous`, 'fsdp-ts/layers-checkpoint@1');
    const ranks = (await spawnThreadRanks(2, fixture, 'damagedRank', {
      args: { directories: [old, crashed] },
      timeoutMs: 90_000,
    })) as DamagedResult[];
    for (const result of ranks) {
      result.errors.forEach((error, index) => {
        expect(error).toMatch(/^checkpoint-format: /);
        expect(error).toContain(
          index === 0
            ? `${old} is a checkpoint in the old @fsdp-ts/layers format (fsdp-ts/layers-checkpoint@2)`
            : `${crashed}.previous is a checkpoint in the old @fsdp-ts/layers format (fsdp-ts/layers-checkpoint@1)`,
        );
        expect(error).toContain("reads checkpoints in @fsdp-ts/fsdp's checkpoint format (version 3");
        expect(error).toContain('tf.loadLayersModel');
        expect(error).toContain('trainer.saveCheckpoint(dir)');
      });
      expect(result.unchanged).toBe(true);
    }
  });
});

function flipByte(path: string): void {
  const bytes = readFileSync(path);
  bytes[Math.floor(bytes.length / 2)]! ^= 0x10;
  writeFileSync(path, bytes);
}
