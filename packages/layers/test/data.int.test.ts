import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { describe, expect, it } from 'vitest';
import { type DataRankResult, type DataResult, reference, type Scenario } from './fixtures/data-run';

const fixture = new URL('./fixtures/data-run.ts', import.meta.url);

// Stated tolerance, as the parity test: 1e-5 relative (values below 1e-2 compared at that scale);
// only the summation order differs (per-rank partial sums vs one sum over the global batch).
function expectClose(actual: number, expected: number, what: string): void {
  expect(Math.abs(actual - expected), `${what}: ${actual} vs ${expected}`).toBeLessThanOrEqual(
    1e-5 * Math.max(Math.abs(expected), 1e-2),
  );
}

function expectSame(result: DataResult, expected: DataResult, label: string): void {
  expect(result.losses.length, label).toBe(expected.losses.length);
  result.losses.forEach((loss, index) => {
    expectClose(loss, expected.losses[index]!, `${label} loss ${index}`);
  });
  expect(Object.keys(result.history).sort(), label).toEqual(Object.keys(expected.history).sort());
  for (const [name, values] of Object.entries(expected.history)) {
    expect(result.history[name]!.length, `${label} ${name}`).toBe(values.length);
    values.forEach((value, epoch) => {
      expectClose(result.history[name]![epoch]!, value, `${label} ${name}[${epoch}]`);
    });
  }
  for (const [weight, values] of result.weights.entries()) {
    for (const [index, value] of values.entries())
      expectClose(value, expected.weights[weight]![index]!, `${label} weight ${weight}[${index}]`);
  }
}

describe('ShardedTrainer.fitDataset and multi-input / multi-output models (W=2)', () => {
  it('match model.fitDataset and model.fit; datasets that differ across ranks fail on every rank', async () => {
    const ranks = (await spawnThreadRanks(2, fixture, 'dataRank', {
      args: {},
      timeoutMs: 150_000,
    })) as DataRankResult[];
    const references = new Map<Scenario, DataResult>();
    for (const scenario of ['dataset', 'dataset-repeat', 'multi'] as const)
      references.set(scenario, await reference(scenario));
    // The shared iterator of batchesPerEpoch: 2 epochs of 2 batches from a 3-batch dataset repeated.
    expect(references.get('dataset-repeat')!.losses).toHaveLength(4);
    expect(references.get('dataset')!.losses).toHaveLength(6);
    expect(references.get('dataset')!.history.val_loss).toHaveLength(2);
    // Two outputs: model.fit logs each output's loss and metric ('accuracy' applies to both heads).
    expect(Object.keys(references.get('multi')!.history).sort()).toEqual([
      'label_acc',
      'label_loss',
      'loss',
      'score_acc',
      'score_loss',
    ]);
    for (const [rank, result] of ranks.entries()) {
      for (const run of result.runs)
        expectSame(run.result, references.get(run.scenario)!, `rank ${rank} ${run.scenario}/${run.strategy}`);
      expect(result.mismatch).toMatch(
        /^invalid-data: dataset batch 2: the ranks' datasets differ: rank 0 has 12 samples, rank 1 has 11 samples/,
      );
    }
  });
});
