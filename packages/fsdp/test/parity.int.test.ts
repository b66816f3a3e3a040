import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { describe, expect, it } from 'vitest';
import { typescriptScriptArguments } from '../../collectives/test/helpers/rank-commands';
import type { ParityRun } from './fixtures/parity-runs';
import {
  type TrainingArguments,
  type TrainingResult,
  tinyConfig,
  trainReference,
} from './fixtures/training-run';
import { keepGatheredRecompute } from './support/keep-gathered-recompute';

const fixture = new URL('./fixtures/parity-runs.ts', import.meta.url);

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

// [Note: parity launches] Starting a thread rank costs more CPU than a run of the tiny GPT
// (tsx and tfjs load in every thread), so the thread runs of one world size share one launch:
// every test of the file plans its run while vitest collects the tests, the first test of a world
// size to need its results starts the launch with every run planned for that size (in
// parity-runs.ts, each on a new default group and a new model, as in its own launch), and each
// test checks its own run's results. A failed launch fails every test of its world size.
const plannedRuns = new Map<number, ParityRun[]>();
const launches = new Map<number, Promise<Partial<TrainingResult>[][]>>();
// Bounds for a launch of every run of one world size (up to 12) on a loaded 2-core machine.
const launchTimeoutMs = 900_000;
const testTimeoutMs = launchTimeoutMs + 60_000;

/** Plans `run` on its world size's shared launch; the returned function gives its results by rank. */
function planned<Result extends Partial<TrainingResult>>(
  size: number,
  run: ParityRun,
): () => Promise<Result[]> {
  const runs = plannedRuns.get(size) ?? [];
  plannedRuns.set(size, runs);
  const index = runs.push(run) - 1;
  return async () => {
    let launch = launches.get(size);
    if (launch === undefined) {
      launch = spawnThreadRanks(size, fixture, 'parityRuns', {
        args: { runs },
        timeoutMs: launchTimeoutMs,
      }) as Promise<Partial<TrainingResult>[][]>;
      launches.set(size, launch);
    }
    return (await launch).map((results) => results[index] as Result);
  };
}

/** The tiny GPT's FSDP run of `args` on thread ranks, planned on its world size's launch. */
function plannedTraining(args: TrainingArguments): () => Promise<TrainingResult[]> {
  return planned<TrainingResult>(args.worldSize, { kind: 'training', args });
}

async function checkParity(
  args: TrainingArguments,
  results: () => Promise<TrainingResult[]>,
): Promise<TrainingResult[]> {
  const reference = await trainReference(args);
  return checkParityOf(args, reference, await results());
}

function checkParityOf(
  args: TrainingArguments,
  reference: TrainingResult,
  results: TrainingResult[],
): TrainingResult[] {
  expect(results).toHaveLength(args.worldSize);
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
    const args = base(worldSize);
    const results = plannedTraining(args);
    it(`full-shard, flattened, W=${worldSize}`, { timeout: testTimeoutMs }, async () => {
      // Its preset reshards after forward: the non-root units are sharded again.
      for (const result of await checkParity(args, results))
        expect(result.statesAfterForward).toEqual(['unsharded', 'sharded', 'sharded']);
    });
  }
  // [Note: gathered values the backend holds]: on wasm a unit's gathered buffer is freed once its
  // tensors are restored for its backward; on cpu its tensors alias that buffer, which stays.
  for (const backend of ['wasm', 'cpu'] as const) {
    for (const activationCheckpointing of [false, true]) {
      const args = base(2, { backend, activationCheckpointing, recordBackwardGathering: true });
      const results = plannedTraining(args);
      const kept = backend === 'cpu';
      it(`full-shard on ${backend}${activationCheckpointing ? ', recomputed' : ''}: the gathered buffer ${kept ? 'stays' : 'is freed'} during a unit's backward, W=2`, {
        timeout: testTimeoutMs,
      }, async () => {
        for (const result of await checkParity(args, results))
          expect(result.gatheredDuringBackward).toEqual([kept, kept]);
      });
    }
  }
  const shardGradOp = base(3, { strategy: 'shard-grad-op' });
  const shardGradOpResults = plannedTraining(shardGradOp);
  it('shard-grad-op, flattened, W=3', { timeout: testTimeoutMs }, async () => {
    await checkParity(shardGradOp, shardGradOpResults);
  });
  // No-shard awaits its all-reduces only after backward (see [Note: bounded gradient memory]).
  for (const worldSize of [1, 2, 3, 4]) {
    const args = base(worldSize, { strategy: 'no-shard' });
    const results = plannedTraining(args);
    it(`no-shard, flattened, W=${worldSize}`, { timeout: testTimeoutMs }, async () => {
      await checkParity(args, results);
    });
  }
  for (const strategy of ['full-shard', 'shard-grad-op', 'no-shard'] as const) {
    const args = base(2, { strategy, flattenParameters: false });
    const results = plannedTraining(args);
    it(`${strategy}, unflattened, W=2`, { timeout: testTimeoutMs }, async () => {
      await checkParity(args, results);
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
    [...flags, process.execPath, ...typescriptScriptArguments(), script, JSON.stringify(runs)],
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
    const args = base(worldSize, { strategy, flattenParameters, activationCheckpointing: true });
    const results = plannedTraining(args);
    it(`${strategy}, ${flattenParameters ? 'flattened' : 'unflattened'}, W=${worldSize}`, {
      timeout: testTimeoutMs,
    }, async () => {
      await checkParity(args, results);
    });
  }
});

describe('a sharding strategy added as a preset (test/support/keep-gathered-recompute.ts)', () => {
  const args = base(3, { strategy: keepGatheredRecompute, steps: 6 });
  const results = plannedTraining(args);
  it('keep-gathered recompute trains like the unwrapped run, W=3, and keeps units gathered after forward', {
    timeout: testTimeoutMs,
  }, async () => {
    // The preset's settings reach the runtime: full-shard would leave the non-root units sharded here.
    for (const result of await checkParity(args, results))
      expect(result.statesAfterForward).toEqual(['unsharded', 'unsharded', 'unsharded']);
  });
});

describe('random layers under full-shard', () => {
  type NoisyResult = Pick<TrainingResult, 'losses' | 'pieces'>;
  const noisy = (strategy: 'full-shard' | 'shard-grad-op') =>
    planned<NoisyResult>(2, { kind: 'noisy', args: { strategy, steps: 3 } });
  const recomputedResults = noisy('full-shard');
  const keptResults = noisy('shard-grad-op');
  it('the recompute replays every random layer (a test-only NoisyScale, not a Dropout): full-shard equals shard-grad-op', {
    timeout: testTimeoutMs,
  }, async () => {
    const recomputed = await recomputedResults();
    const kept = await keptResults();
    expect(recomputed).toHaveLength(2);
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
  const args = base(2, { config: { ...tinyConfig, dropout: 0.2 }, steps: 3 });
  const recomputedResults = plannedTraining({ ...args, activationCheckpointing: true });
  const keptResults = plannedTraining(args);
  const keptGatheredResults = plannedTraining({ ...args, strategy: 'shard-grad-op' });
  it('recompute replays the dropout masks: activation checkpointing on equals off (dropout 0.2), both like shard-grad-op', {
    timeout: testTimeoutMs,
  }, async () => {
    const recomputed = await recomputedResults();
    const kept = await keptResults();
    const keptGathered = await keptGatheredResults();
    expect(kept).toHaveLength(2);
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
