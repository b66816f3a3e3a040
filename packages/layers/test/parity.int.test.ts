import { spawnThreadRanks } from '@fsdp-ts/collectives';
import type { BackendName } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import type { ModelKind } from './fixtures/models';
import {
  type OptimizerKind,
  type ParityArguments,
  type ParityCase,
  type RunResult,
  trainReference,
} from './fixtures/parity-run';

const fixture = new URL('./fixtures/parity-run.ts', import.meta.url);

const models: ModelKind[] = ['mlp', 'cnn'];
const optimizers: OptimizerKind[] = ['sgd', 'adam'];
const strategies = ['replicate', 'shard-optimizer', 'shard-gradients', 'full-shard'] as const;

// Parameters + gradients + optimizer state per rank between steps, by strategy, in units of P
// trainable elements over N ranks and S bytes of optimizer state per element (Adam 8, SGD 0).
const betweenSteps: Record<(typeof strategies)[number], (n: number, s: number) => number> = {
  replicate: (_n, s) => 8 + s,
  'shard-optimizer': (n, s) => 8 + s / n,
  'shard-gradients': (n, s) => 4 + (4 + s) / n,
  // Nothing gathered between steps: every layer's weights were released after its backward.
  'full-shard': (n, s) => (8 + s) / n,
};
const cases: ParityCase[] = models.flatMap((model) =>
  optimizers.flatMap((optimizer) => strategies.map((strategy) => ({ model, optimizer, strategy }))),
);

// 12 samples per global batch: split 6+6 over 2 ranks and 4+4+4 over 3.
const base: Omit<ParityArguments, 'cases'> = { steps: 5, globalBatch: 12, backend: 'cpu' };

// Stated tolerance: 1e-5 relative; values smaller than 1e-2 are compared at that scale (1e-7
// absolute), since only the summation order differs (sums of per-rank partial gradients, and of
// per-rank batch-norm statistics, vs one sum over the global batch).
function expectClose(actual: number, expected: number, what: string): void {
  expect(Math.abs(actual - expected), `${what}: ${actual} vs ${expected}`).toBeLessThanOrEqual(
    1e-5 * Math.max(Math.abs(expected), 1e-2),
  );
}

function expectParity(result: RunResult, reference: RunResult, label: string): void {
  expect(result.losses).toHaveLength(reference.losses.length);
  result.losses.forEach((loss, step) => {
    expectClose(loss, reference.losses[step]!, `${label} loss of step ${step}`);
  });
  expect(result.weights).toHaveLength(reference.weights.length);
  result.weights.forEach((values, weight) => {
    values.forEach((value, index) => {
      expectClose(value, reference.weights[weight]![index]!, `${label} weight ${weight}[${index}]`);
    });
  });
}

const wasmCases = cases.filter((parity) => parity.model === 'mlp');

describe('ShardedTrainer parity with single-process model.fit (5 steps, same global batches)', () => {
  const references = new Map<string, RunResult>();
  const referenceFor = async (backend: BackendName, parity: ParityCase): Promise<RunResult> => {
    const key = `${backend}/${parity.model}/${parity.optimizer}`;
    if (!references.has(key)) references.set(key, await trainReference({ ...base, backend, cases }, parity));
    return references.get(key)!;
  };

  const runs: [number, BackendName, ParityCase[], string][] = [
    [2, 'cpu', cases, 'W=2: MLP and CNN with batch norm, SGD and Adam, every strategy'],
    [3, 'cpu', cases, 'W=3: MLP and CNN with batch norm, SGD and Adam, every strategy'],
    // wasm is initBackend's default; the CNN cannot train there (no Conv2DBackpropFilter kernel).
    [2, 'wasm', wasmCases, 'W=2 on the wasm backend: MLP, SGD and Adam, every strategy'],
  ];
  for (const [worldSize, backend, runCases, title] of runs) {
    it(title, async () => {
      const args: ParityArguments = { ...base, backend, cases: runCases };
      const ranks = (await spawnThreadRanks(worldSize, fixture, 'trainRank', {
        args,
        timeoutMs: 150_000,
      })) as RunResult[][];
      for (const [index, parity] of runCases.entries()) {
        const reference = await referenceFor(backend, parity);
        // The losses actually move (the test would not notice a trainer that never steps otherwise).
        expect(reference.losses[0]).not.toBeCloseTo(reference.losses[4]!, 3);
        const label = `${backend} W=${worldSize} ${parity.model}/${parity.optimizer}/${parity.strategy}`;
        for (const [rank, results] of ranks.entries()) {
          const { memory } = results[index]!;
          expect(memory).toHaveLength(5);
          for (const held of memory!) {
            const expected =
              held.trainableParameters *
              betweenSteps[parity.strategy](worldSize, parity.optimizer === 'adam' ? 8 : 0);
            // Within 10%: shards are padded to equal sizes, and a rank's optimizer state covers
            // only the real elements of its shard (fewer on the last rank). wasm keeps the
            // weights in its heap too (4 bytes each, counted as variableCopies) except under
            // full-shard, where they are released between steps.
            const copies =
              backend === 'wasm' && parity.strategy !== 'full-shard' ? 4 * held.trainableParameters : 0;
            expect(held.variableCopies, `${label} rank ${rank} copies`).toBe(copies);
            const what = `${label} rank ${rank} bytes`;
            expect(held.total - copies, what).toBeGreaterThanOrEqual(expected * 0.9);
            expect(held.total - copies, what).toBeLessThanOrEqual(expected * 1.1);
            if (backend === 'cpu') expect(held.met).toBe(true);
            if (parity.strategy === 'full-shard') {
              // Some layer was gathered during the step, within the model's "largest layer" allowance.
              expect(held.peak).toBeGreaterThan(held.total);
              expect(held.peak).toBeLessThanOrEqual(held.model * 1.1);
            }
          }
          if (backend === 'cpu') {
            // Between steps the cpu backend holds no trainable weight under full-shard, all of them otherwise.
            const trainableCount = reference.weights.length - (parity.model === 'cnn' ? 2 : 0);
            expect(results[index]!.residentWeights).toEqual(
              Array(5).fill(parity.strategy === 'full-shard' ? 0 : trainableCount),
            );
            // After trainer.dispose() only the model's weight values (views of the flat buffers) remain.
            expect(results[index]!.leakedTensors, `${label} rank ${rank} tensors`).toBe(trainableCount);
          }
          expect(results[index]!.leakedVariables, `${label} rank ${rank} variables`).toBe(0);
          expectParity(results[index]!, reference, `${label} rank ${rank}`);
        }
      }
    });
  }
});

describe('bucket reductions overlapped with backward ([Note: reductions overlapped with backward])', () => {
  it('give the same losses and weights as reducing after backward, W=3, with a rank without samples in every batch', async () => {
    // Global batches of 2 over 3 ranks: rank 2 has no sample, so it issues every bucket's
    // reduction without a backward, in the order the others issue them during theirs. Small
    // buckets (several per model) so that some reductions start while backward still runs.
    const overlapCases = cases.filter((parity) => parity.model === 'mlp' && parity.strategy !== 'full-shard');
    const run = async (overlapGradientReduction: boolean) =>
      (await spawnThreadRanks(3, fixture, 'trainRank', {
        args: {
          ...base,
          globalBatch: 2,
          cases: overlapCases,
          overlapGradientReduction,
          bucketSizeBytes: 1024,
        },
        timeoutMs: 150_000,
      })) as RunResult[][];
    const after = await run(false);
    const overlapped = await run(true);
    // Stated tolerance: none. A tap receives the same summed gradient tf.variableGrads returns, and
    // adding it to a zeroed buffer is exact, so the two schedules give identical bits.
    overlapped.forEach((rank, rankIndex) => {
      rank.forEach((result, index) => {
        const label = `rank ${rankIndex} ${overlapCases[index]!.strategy}/${overlapCases[index]!.optimizer}`;
        expect(result.losses, label).toEqual(after[rankIndex]![index]!.losses);
        expect(result.weights, label).toEqual(after[rankIndex]![index]!.weights);
      });
    });
    for (const result of after[0]!) {
      expect(result.losses).toHaveLength(base.steps);
      for (const loss of result.losses) expect(Number.isFinite(loss)).toBe(true);
    }
    // The overlap happens: on the ranks with samples (1 and 2; rank 0's slice of 2 rows over 3
    // ranks is empty) buckets were issued by a tap while the backward still ran (bit-equality
    // above would also hold if every bucket waited for the end). Every bucket is issued once per
    // step, by a tap or after the backward; rank 0 issues all of them after its (absent) backward.
    overlapped.forEach((rank, rankIndex) => {
      for (const result of rank) {
        const counts = result.overlap!;
        expect(counts.buckets).toBeGreaterThanOrEqual(2);
        expect(counts.issuedDuringBackward + counts.issuedAfterBackward).toBe(counts.buckets * base.steps);
        if (rankIndex === 0) expect(counts.issuedDuringBackward).toBe(0);
        else expect(counts.issuedDuringBackward, `rank ${rankIndex}`).toBeGreaterThan(0);
      }
    });
    // trainer.dispose() frees the taps' anchor variable: only the model's weight values remain.
    for (const rank of [...after, ...overlapped]) {
      for (const result of rank) {
        expect(result.leakedVariables).toBe(0);
        expect(result.leakedTensors).toBe(result.weights.length);
      }
    }
  });

  it('sum the gradient of a shared Dense layer over both of its uses before issuing its bucket, W=2', async () => {
    // One Dense layer applied twice in sequence: its tap must hold the gradient of both uses when
    // its bucket is issued. Buckets of 128 bytes: the shared kernel (256 bytes) has one of its own.
    const sharedCases = optimizers.flatMap((optimizer) =>
      (['replicate', 'shard-optimizer', 'shard-gradients'] as const).map(
        (strategy): ParityCase => ({ model: 'shared-mlp', optimizer, strategy }),
      ),
    );
    const run = async (overlapGradientReduction: boolean) =>
      (await spawnThreadRanks(2, fixture, 'trainRank', {
        args: { ...base, cases: sharedCases, overlapGradientReduction, bucketSizeBytes: 128 },
        timeoutMs: 150_000,
      })) as RunResult[][];
    const after = await run(false);
    const overlapped = await run(true);
    for (const [index, parity] of sharedCases.entries()) {
      const reference = await trainReference({ ...base, cases: sharedCases }, parity);
      expect(reference.losses[0]).not.toBeCloseTo(reference.losses[4]!, 3);
      for (const rank of [0, 1]) {
        const label = `shared-mlp rank ${rank} ${parity.strategy}/${parity.optimizer}`;
        const result = overlapped[rank]![index]!;
        // Stated tolerance: none between the two schedules (as above); 1e-5 relative against model.fit.
        expect(result.losses, label).toEqual(after[rank]![index]!.losses);
        expect(result.weights, label).toEqual(after[rank]![index]!.weights);
        expectParity(result, reference, `${label} overlapped`);
        expectParity(after[rank]![index]!, reference, `${label} after backward`);
        expect(result.overlap!.buckets).toBeGreaterThanOrEqual(3);
        expect(result.overlap!.issuedDuringBackward, label).toBeGreaterThan(0);
        expect(result.leakedVariables, label).toBe(0);
        expect(result.leakedTensors, label).toBe(result.weights.length);
      }
    }
  });
});
