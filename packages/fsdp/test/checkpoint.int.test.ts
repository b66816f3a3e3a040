import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { listCheckpoints } from '@fsdp-ts/fsdp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CorruptionArguments, RunArguments, RunResult } from './fixtures/checkpoint-training';
import type { TrainingResult } from './fixtures/training-run';

const fixture = new URL('./fixtures/checkpoint-training.ts', import.meta.url);
const work = mkdtempSync(join(tmpdir(), 'fsdp-checkpoint-test-'));
const rootA = join(work, 'run-a');

function run(worldSize: number, args: RunArguments): Promise<RunResult[]> {
  return spawnThreadRanks(worldSize, fixture, 'trainRank', { args, timeoutMs: 150_000 }) as Promise<
    RunResult[]
  >;
}

/** Every parameter reassembled from the ranks' pieces (NaN where no rank reported). */
function assemble(pieces: TrainingResult['pieces'][]): Record<string, number[]> {
  const full: Record<string, number[]> = {};
  for (const rankPieces of pieces) {
    for (const [name, { offset, values }] of Object.entries(rankPieces)) {
      full[name] ??= [];
      const target = full[name];
      values.forEach((value, index) => {
        target[offset + index] = value;
      });
    }
  }
  return full;
}

let uninterrupted: RunResult[];

beforeAll(async () => {
  // W=2, 20 steps, a checkpoint every 5 steps, keep the newest 3.
  uninterrupted = await run(2, { root: rootA, until: 20, saveEvery: 5, keep: 3 });
}, 240_000);

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

describe('saveCheckpoint / loadCheckpoint (tiny GPT, AdamW, thread ranks)', () => {
  it('keeps the newest 3 checkpoints and points latest at the last', () => {
    expect(listCheckpoints(rootA).map((entry) => entry.step)).toEqual([10, 15, 20]);
    expect(readFileSync(join(rootA, 'latest'), 'utf8').trim()).toBe('step-00000020');
    const metadata = JSON.parse(readFileSync(join(rootA, 'step-00000010', 'metadata.json'), 'utf8'));
    expect(metadata.worldSize).toBe(2);
    expect(metadata.files.map((file: { file: string }) => file.file)).toEqual([
      'shard-00000-of-00002.bin',
      'shard-00001-of-00002.bin',
    ]);
    expect(metadata.files[0].sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(metadata.extra.nextStep).toBe(10);
  });

  it('resumes bitwise at the same world size and within 1e-5 at W=3 and W=1', async () => {
    const step10 = join(rootA, 'step-00000010');
    const [same, three, one] = await Promise.all([
      run(2, { root: join(work, 'resume-2'), until: 20, loadFrom: step10 }),
      run(3, { root: join(work, 'resume-3'), until: 20, loadFrom: step10 }),
      run(1, { root: join(work, 'resume-1'), until: 20, loadFrom: step10 }),
    ]);
    expect(same[0]!.startStep).toBe(10);
    // Same world size: bit for bit (float32 values compared exactly as numbers).
    expect(same.map((result) => result.pieces)).toEqual(uninterrupted.map((result) => result.pieces));
    for (let step = 10; step < 20; step++) expect(same[0]!.losses[step]).toBe(uninterrupted[0]!.losses[step]);
    // Other world sizes: only the summation order differs; stated tolerance 1e-5 relative.
    for (const results of [three, one]) {
      for (let step = 10; step < 20; step++) {
        const expected = uninterrupted[0]!.losses[step]!;
        const actual = results[0]!.losses[step]!;
        expect(Math.abs(actual - expected), `step ${step}: ${actual} vs ${expected}`).toBeLessThanOrEqual(
          1e-5 * Math.abs(expected),
        );
      }
    }
    // The W=3 and W=1 loads really resharded: every element arrived (no NaN holes).
    const reference = assemble(uninterrupted.map((result) => result.pieces));
    const resharded = assemble(one.map((result) => result.pieces));
    for (const [name, values] of Object.entries(reference)) {
      expect(resharded[name]!.length, name).toBe(values.length);
      values.forEach((value, index) => {
        expect(Math.abs(resharded[name]![index]! - value)).toBeLessThanOrEqual(
          1e-4 * Math.max(Math.abs(value), 0.02),
        );
      });
    }
  }, 240_000);

  it('fails clearly for truncated, corrupt, missing and mismatched checkpoints and keeps the previous one loadable', async () => {
    const damaged = join(work, 'damaged');
    cpSync(rootA, damaged, { recursive: true });
    const copy = (label: string) => {
      const path = join(work, `case-${label}`);
      cpSync(join(rootA, 'step-00000020'), path, { recursive: true });
      return path;
    };
    const truncated = copy('truncated');
    truncateSync(join(truncated, 'shard-00000-of-00002.bin'), 100);
    const flipped = copy('flipped');
    const flippedFile = join(flipped, 'shard-00001-of-00002.bin');
    const bytes = readFileSync(flippedFile);
    bytes[Math.floor(bytes.length / 5)]! ^= 0x40;
    writeFileSync(flippedFile, bytes);
    const missing = copy('missing');
    rmSync(join(missing, 'shard-00001-of-00002.bin'));
    // The newest checkpoint of the copied root loses its metadata: loading the root falls back, saying so.
    rmSync(join(damaged, 'step-00000020', 'metadata.json'));
    const args: CorruptionArguments = {
      cases: [
        { label: 'truncated', path: truncated },
        { label: 'flipped', path: flipped },
        { label: 'missing file', path: missing },
        { label: 'no metadata', path: join(damaged, 'step-00000020') },
      ],
      intact: join(damaged, 'step-00000015'),
      damagedRoot: damaged,
      mismatchConfig: { vocabSize: 13, dModel: 24, nLayers: 2, nHeads: 2, seqLen: 8, seed: 7 },
      noShardRoot: join(work, 'no-shard'),
    };
    const results = (await spawnThreadRanks(2, fixture, 'corruptionRank', { args, timeoutMs: 120_000 })) as {
      caught: {
        label: string;
        name: string;
        reason: string;
        file?: string;
        parameters: string[];
        message: string;
      }[];
      unchanged: boolean;
      changedByIntact: boolean;
      intactStep: number;
      isCheckpointError: boolean;
      noShardRoundTrip: boolean;
      rootLoaded: string;
      rootFound: string | null;
      rootLog: string[];
    }[];
    for (const result of results) {
      expect(result.isCheckpointError, JSON.stringify(result.caught)).toBe(true);
      expect(result.unchanged).toBe(true);
      expect(result.changedByIntact).toBe(true);
      expect(result.intactStep).toBe(15);
      expect(result.noShardRoundTrip).toBe(true);
      // latest names step 20, whose metadata is gone: findLatestCheckpoint and loadCheckpoint(root)
      // agree on step 15, and each logs one line naming both steps.
      expect(result.rootLoaded).toBe(join(damaged, 'step-00000015'));
      expect(result.rootFound).toBe(result.rootLoaded);
      expect(result.rootLog).toHaveLength(2);
      for (const line of result.rootLog)
        expect(line).toMatch(/'step-00000020', which is damaged.*step-00000015/);
    }
    // Under no-shard only rank 0 writes: one file, saved at shard world size 1.
    const noShard = JSON.parse(
      readFileSync(join(work, 'no-shard', 'step-00000015', 'metadata.json'), 'utf8'),
    );
    expect(noShard.shardWorldSize).toBe(1);
    expect(noShard.files.map((file: { file: string }) => file.file)).toEqual(['shard-00000-of-00001.bin']);
    const own = (label: string) =>
      results.flatMap((result) =>
        result.caught.filter((entry) => entry.label === label && entry.reason !== 'peer-failed'),
      );
    const expectation: [string, string, string][] = [
      ['truncated', 'truncated', 'shard-00000-of-00002.bin'],
      ['flipped', 'corrupt', 'shard-00001-of-00002.bin'],
      ['missing file', 'missing', 'shard-00001-of-00002.bin'],
      ['no metadata', 'missing', 'metadata.json'],
      ['mismatched model', 'model-mismatch', 'metadata.json'],
    ];
    for (const [label, reason, file] of expectation) {
      const errors = own(label);
      expect(
        errors.length,
        `${label}: ${JSON.stringify(results.map((result) => result.caught))}`,
      ).toBeGreaterThan(0);
      for (const error of errors) {
        expect(error.reason, error.message).toBe(reason);
        expect(error.message).toContain(file);
        if (label !== 'no metadata') {
          expect(error.parameters.length, error.message).toBeGreaterThan(0);
          expect(error.message).toContain(error.parameters[0]!);
        }
      }
    }
    expect(own('mismatched model')[0]!.message).toMatch(/blocks\.0\.\S+ is \[/);
    // The originals are untouched by all of this.
    expect(existsSync(join(rootA, 'step-00000020', 'metadata.json'))).toBe(true);
  }, 150_000);
});
