import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { describe, expect, it } from 'vitest';
import {
  type CallbackRankResult,
  callbackScenario,
  type MismatchResult,
  referenceHistory,
} from './fixtures/callbacks-run';

const fixture = new URL('./fixtures/callbacks-run.ts', import.meta.url);

describe('ShardedTrainer callbacks, History, early stopping and progress (2 thread ranks)', () => {
  it('gives every rank identical logs, a History like model.fit, and stops every rank at the same epoch', async () => {
    const [first, second] = (await spawnThreadRanks(2, fixture, 'callbacksRank', {
      timeoutMs: 150_000,
    })) as CallbackRankResult[];
    const batches = Math.ceil(callbackScenario.samples / callbackScenario.batchSize);
    expect(first!.batchLogs).toHaveLength(batches * callbackScenario.epochs);
    expect(first!.batchLogs[0]).toEqual({
      batch: 0,
      size: callbackScenario.batchSize,
      loss: expect.any(Number),
      acc: expect.any(Number),
    });
    expect(Object.keys(first!.epochLogs[0]!).sort()).toEqual(['acc', 'loss', 'val_acc', 'val_loss']);
    // Identical, not merely close: every rank reports the all-reduced values.
    expect(second!.batchLogs).toEqual(first!.batchLogs);
    expect(second!.epochLogs).toEqual(first!.epochLogs);
    expect(second!.history).toEqual(first!.history);

    const reference = await referenceHistory();
    expect(Object.keys(first!.history).sort()).toEqual(Object.keys(reference).sort());
    for (const [key, values] of Object.entries(reference)) {
      values.forEach((value, epoch) => {
        const actual = first!.history[key]![epoch]!;
        expect(
          Math.abs(actual - value),
          `${key} of epoch ${epoch}: ${actual} vs ${value}`,
        ).toBeLessThanOrEqual(1e-5 * Math.max(Math.abs(value), 1e-2));
      });
    }

    expect(first!.earlyStoppedEpochs).toEqual([0, 1]);
    expect(second!.earlyStoppedEpochs).toEqual([0, 1]);
    expect(first!.oneRankStoppedEpochs).toEqual([0, 1, 2]);
    expect(second!.oneRankStoppedEpochs).toEqual([0, 1, 2]);

    expect(first!.progressLines).toHaveLength(callbackScenario.epochs);
    expect(first!.progressLines[0]).toMatch(/^Epoch 1\/3 · [\d.]+ s · loss=[\d.]+ acc=[\d.]+ val_loss=/);
    expect(second!.progressLines).toEqual([]);

    for (const result of [first!, second!]) {
      expect(result.batchMismatch).toMatch(
        /^invalid-data: .*same number of samples as target tensors\. Found 40 input sample\(s\) and 37 target sample\(s\)/,
      );
    }
  });

  it('fails on every rank naming the first differing weight when the models differ', async () => {
    const ranks = (await spawnThreadRanks(2, fixture, 'mismatchRank', {
      timeoutMs: 60_000,
    })) as MismatchResult[][];
    for (const [byValue, byShape, byShapeWithFrozenLayer, byFrozenOnOneRank] of ranks) {
      expect(byValue!.code).toBe('replica-mismatch');
      expect(byValue!.weight).toMatch(/dense_Dense\d+\/kernel$/);
      expect(byValue!.message).toContain('weight 2 (');
      expect(byValue!.message).toContain('[16, 12], trainable');
      expect(byValue!.message).toContain('(ranks hold 6, 6 weights, 6, 6 of them trainable)');
      expect(byShape!.code).toBe('replica-mismatch');
      expect(byShape!.message).toContain('weight 2 (');
      // The frozen first layer's weights are counted as weights, not as trainable ones (and
      // listed last by tfjs, so the differing kernel is weight 0).
      expect(byShapeWithFrozenLayer!.code).toBe('replica-mismatch');
      expect(byShapeWithFrozenLayer!.message).toContain('weight 0 (');
      expect(byShapeWithFrozenLayer!.message).toContain('(ranks hold 6, 6 weights, 4, 4 of them trainable)');
      // Same shapes in the same order, but rank 1 trains two weights fewer.
      expect(byFrozenOnOneRank!.code).toBe('replica-mismatch');
      expect(byFrozenOnOneRank!.message).toContain('weight 4 (');
      expect(byFrozenOnOneRank!.message).toContain('different shape or trainable flag on rank 1');
      expect(byFrozenOnOneRank!.message).toContain('(ranks hold 6, 6 weights, 6, 4 of them trainable)');
    }
  });
});
