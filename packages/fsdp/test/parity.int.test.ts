import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { describe, expect, it } from 'vitest';
import {
  type TrainingArguments,
  type TrainingResult,
  tinyConfig,
  trainReference,
} from './fixtures/training-run';
import { keepGatheredRecompute } from './support/keep-gathered-recompute';

const fixture = new URL('./fixtures/training-run.ts', import.meta.url);

function base(worldSize: number, overrides: Partial<TrainingArguments> = {}): TrainingArguments {
  return {
    config: tinyConfig,
    strategy: 'full-shard',
    flattenParameters: true,
    steps: 10,
    batch: 2,
    seqLen: 8,
    worldSize,
    backend: 'cpu',
    ...overrides,
  };
}

/** Reassembles every parameter from the ranks' pieces (each element claimed exactly once). */
function assemble(
  results: TrainingResult[],
  reference: TrainingResult,
  field: 'pieces' | 'firstGradients',
): Record<string, Float64Array> {
  const assembled: Record<string, Float64Array> = {};
  for (const [name, { values }] of Object.entries(reference[field])) {
    const full = new Float64Array(values.length).fill(Number.NaN);
    for (const result of results) {
      const piece = result[field][name];
      expect(piece, `rank result lacks ${name}`).toBeDefined();
      piece!.values.forEach((value, index) => {
        full[piece!.offset + index] = value;
      });
    }
    assembled[name] = full;
  }
  return assembled;
}

// Stated tolerances. Gradients after the first backward: 1e-5 of the largest |gradient| of the
// tensor (only the summation order differs: mean of per-rank means vs one mean). Losses and
// parameters after 10 AdamW steps (lr 1e-3): 1e-5 relative; values below the init scale (std
// 0.02) are compared at that scale (2e-7 absolute). Adam turns a relative gradient difference d
// in a near-zero component into an update difference of about d x lr, hence the modest lr.
function expectClose(actual: number, expected: number, what: string): void {
  expect(Math.abs(actual - expected), `${what}: ${actual} vs ${expected}`).toBeLessThanOrEqual(
    1e-5 * Math.max(Math.abs(expected), 0.02),
  );
}

function expectSameGradients(results: TrainingResult[], reference: TrainingResult): void {
  const assembled = assemble(results, reference, 'firstGradients');
  for (const [name, { values }] of Object.entries(reference.firstGradients)) {
    const scale = Math.max(...values.map(Math.abs), 1e-12);
    values.forEach((value, index) => {
      const actual = assembled[name]![index]!;
      expect(Math.abs(actual - value), `grad ${name}[${index}]: ${actual} vs ${value}`).toBeLessThanOrEqual(
        1e-5 * scale,
      );
    });
  }
}

const threadRanks = (args: TrainingArguments) =>
  spawnThreadRanks(args.worldSize, fixture, 'trainRank', { args, timeoutMs: 120_000 }) as Promise<
    TrainingResult[]
  >;

async function checkParity(
  args: TrainingArguments,
  run: (args: TrainingArguments) => Promise<TrainingResult[]> = threadRanks,
): Promise<TrainingResult[]> {
  const reference = await trainReference(args);
  const results = await run(args);
  for (const result of results)
    result.losses.forEach((loss, step) => {
      expectClose(loss, reference.losses[step]!, `loss of step ${step}`);
    });
  expect(reference.losses.at(-1)!).toBeLessThan(reference.losses[0]!);
  expectSameGradients(results, reference);
  const assembled = assemble(results, reference, 'pieces');
  for (const [name, { values }] of Object.entries(reference.pieces)) {
    values.forEach((value, index) => {
      expectClose(assembled[name]![index]!, value, `${name}[${index}]`);
    });
  }
  return results;
}

describe('FSDP parity with the unwrapped single-process run (tiny GPT, 10 AdamW steps)', () => {
  for (const worldSize of [1, 2, 3, 4]) {
    it(`full-shard, flattened, W=${worldSize}`, async () => {
      const results = await checkParity(base(worldSize));
      // Its preset reshards after forward: the non-root units are sharded again.
      for (const result of results)
        expect(result.statesAfterForward).toEqual(['unsharded', 'sharded', 'sharded']);
    });
  }
  it('shard-grad-op, flattened, W=3', async () => {
    await checkParity(base(3, { strategy: 'shard-grad-op' }));
  });
  // No-shard awaits its all-reduces only after backward (see [Note: bounded gradient memory]).
  for (const worldSize of [1, 2, 3, 4]) {
    it(`no-shard, flattened, W=${worldSize}`, async () => {
      await checkParity(base(worldSize, { strategy: 'no-shard' }));
    });
  }
  for (const strategy of ['full-shard', 'shard-grad-op', 'no-shard'] as const) {
    it(`${strategy}, unflattened, W=2`, async () => {
      await checkParity(base(2, { strategy, flattenParameters: false }));
    });
  }
});

/**
 * Every TrainingArguments of `runs` (one world size) in one `mpirun -np W` job: process ranks on
 * the mpi backend (the default of an mpirun job); each rank's results, by rank, per run.
 */
function mpirunRanks(runs: TrainingArguments[]): Promise<TrainingResult[][]> {
  const directory = mkdtempSync(join(tmpdir(), 'fsdp-parity-mpi-'));
  const script = fileURLToPath(new URL('./fixtures/mpi-training-rank.ts', import.meta.url));
  const size = runs[0]!.worldSize;
  const flags = ['--allow-run-as-root', '--oversubscribe', '--bind-to', 'none', '-np', String(size)];
  const child = spawn(
    'mpirun',
    [
      ...flags,
      process.execPath,
      '--conditions=@fsdp-ts/source',
      '--import',
      'tsx',
      script,
      JSON.stringify(runs),
    ],
    { env: { ...process.env, TEST_RESULT_DIR: directory }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 150_000);
  return new Promise((resolve, reject) =>
    child.on('exit', (code) => {
      clearTimeout(timer);
      try {
        if (code !== 0) throw new Error(`mpirun exited with ${code}:\n${output}`);
        const byRank = Array.from(
          { length: size },
          (_, rank) =>
            JSON.parse(readFileSync(join(directory, `training-${rank}.json`), 'utf8')) as TrainingResult[],
        );
        resolve(runs.map((_, index) => byRank.map((results) => results[index]!)));
      } catch (error) {
        reject(error);
      } finally {
        rmSync(directory, { recursive: true, force: true });
      }
    }),
  );
}

// The same parity on the mpi backend: real processes under mpirun (Open MPI), full-shard and
// no-shard in one mpirun job per world size.
describe('FSDP parity on the mpi backend (process ranks under mpirun)', () => {
  for (const worldSize of [2, 3]) {
    it(`full-shard and no-shard, flattened, W=${worldSize}`, async () => {
      const runs = [base(worldSize), base(worldSize, { strategy: 'no-shard' })];
      const results = await mpirunRanks(runs);
      for (const [index, args] of runs.entries()) await checkParity(args, async () => results[index]!);
    }, 240_000);
  }
});

describe('FSDP parity with activation checkpointing (each unit recomputed in backward)', () => {
  for (const [strategy, worldSize, flattenParameters] of [
    ['full-shard', 2, true],
    ['full-shard', 4, true],
    ['full-shard', 2, false],
    ['shard-grad-op', 3, true],
  ] as const) {
    it(`${strategy}, ${flattenParameters ? 'flattened' : 'unflattened'}, W=${worldSize}`, async () => {
      await checkParity(base(worldSize, { strategy, flattenParameters, activationCheckpointing: true }));
    });
  }
});

describe('a sharding strategy added as a preset (test/support/keep-gathered-recompute.ts)', () => {
  it('keep-gathered recompute trains like the unwrapped run, W=3, and keeps units gathered after forward', async () => {
    const results = await checkParity(base(3, { strategy: keepGatheredRecompute, steps: 6 }));
    // The preset's settings reach the runtime: full-shard would leave the non-root units sharded here.
    for (const result of results)
      expect(result.statesAfterForward).toEqual(['unsharded', 'unsharded', 'unsharded']);
  });
});

describe('random layers under full-shard', () => {
  it('the recompute replays every random layer (a test-only NoisyScale, not a Dropout): full-shard equals shard-grad-op', async () => {
    const noisyFixture = new URL('./fixtures/noisy-recompute.ts', import.meta.url);
    const run = (strategy: 'full-shard' | 'shard-grad-op') =>
      spawnThreadRanks(2, noisyFixture, 'trainNoisy', {
        args: { strategy, steps: 3 },
        timeoutMs: 60_000,
      }) as Promise<Pick<TrainingResult, 'losses' | 'pieces'>[]>;
    const recomputed = await run('full-shard');
    const kept = await run('shard-grad-op');
    recomputed.forEach((result, rank) => {
      result.losses.forEach((loss, step) => {
        expectClose(loss, kept[rank]!.losses[step]!, `rank ${rank} loss of step ${step}`);
      });
      for (const [name, piece] of Object.entries(result.pieces)) {
        piece.values.forEach((value, index) => {
          expectClose(value, kept[rank]!.pieces[name]!.values[index]!, `rank ${rank} ${name}[${index}]`);
        });
      }
    });
  });
});

describe('dropout under full-shard', () => {
  it('recompute replays the dropout masks: activation checkpointing on equals off (dropout 0.2), both like shard-grad-op', async () => {
    const args = base(2, { config: { ...tinyConfig, dropout: 0.2 }, steps: 3 });
    const recomputed = (await spawnThreadRanks(2, fixture, 'trainRank', {
      args: { ...args, activationCheckpointing: true },
    })) as TrainingResult[];
    const kept = (await spawnThreadRanks(2, fixture, 'trainRank', { args })) as TrainingResult[];
    const keptGathered = (await spawnThreadRanks(2, fixture, 'trainRank', {
      args: { ...args, strategy: 'shard-grad-op' },
    })) as TrainingResult[];
    for (const other of [recomputed, keptGathered]) {
      other.forEach((result, rank) => {
        result.losses.forEach((loss, step) => {
          expectClose(loss, kept[rank]!.losses[step]!, `rank ${rank} loss of step ${step}`);
        });
        for (const [name, piece] of Object.entries(result.pieces)) {
          piece.values.forEach((value, index) => {
            expectClose(value, kept[rank]!.pieces[name]!.values[index]!, `rank ${rank} ${name}[${index}]`);
          });
        }
      });
    }
  });
});
