import { initProcessGroup, type ProcessGroup } from '@fsdp-ts/collectives';
import { LayersError, ShardedTrainer, type ShardedTrainerOptions } from '@fsdp-ts/layers';
import { initBackend } from '@fsdp-ts/tensor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildModel, makeData } from './fixtures/models';

async function layersErrorOf(run: () => unknown): Promise<LayersError> {
  try {
    await run();
  } catch (error) {
    if (error instanceof LayersError) return error;
    throw error;
  }
  throw new Error('expected a LayersError, nothing was thrown');
}

describe('ShardedTrainer options reject unknown keys (one-rank shm group)', () => {
  let group: ProcessGroup;
  beforeAll(async () => {
    await initBackend('cpu');
    group = await initProcessGroup({ backend: 'shm', timeoutMs: 10_000, name: 'layers-option-keys' });
  });
  afterAll(async () => {
    await group.destroy();
  });

  const options = (extra: object) =>
    ({
      group,
      optimizer: 'sgd',
      loss: 'categoricalCrossentropy',
      log: () => {},
      ...extra,
    }) as ShardedTrainerOptions;

  it('names the nearest key, and PyTorch and tfjs names their equivalent', async () => {
    const typo = await layersErrorOf(
      () => new ShardedTrainer(buildModel('mlp'), options({ stratgy: 'replicate' })),
    );
    expect(typo.code).toBe('unknown-option');
    expect(typo.message).toContain(
      "ShardedTrainer got an unknown option: 'stratgy' (did you mean 'strategy'?)",
    );
    const pytorch = await layersErrorOf(
      () => new ShardedTrainer(buildModel('mlp'), options({ sharding_strategy: 'FULL_SHARD', lr: 0.1 })),
    );
    expect(pytorch.message).toContain("'sharding_strategy' (strategy here: 'replicate'");
    expect(pytorch.message).toContain('optimizerOptions: { lr }');
  });

  it('checks fit, fitDataset, evaluate and saveCheckpoint arguments', async () => {
    const trainer = new ShardedTrainer(buildModel('mlp'), options({ optimizerOptions: { lr: 0.1 } }));
    const { x, y } = makeData('mlp', 8);
    expect((await layersErrorOf(() => trainer.fit(x, y, { epoch: 1 } as never))).message).toContain(
      "did you mean 'epochs'?",
    );
    expect((await layersErrorOf(() => trainer.fit(x, y, { stepsPerEpoch: 2 } as never))).message).toContain(
      'fitDataset takes batchesPerEpoch',
    );
    expect(
      (
        await layersErrorOf(() =>
          trainer.fitDataset(
            { iterator: async () => ({}) } as never,
            { epochs: 1, validationSteps: 1 } as never,
          ),
        )
      ).message,
    ).toContain('validationBatches');
    expect((await layersErrorOf(() => trainer.evaluate(x, y, { batch_size: 4 } as never))).message).toContain(
      "did you mean 'batchSize'?",
    );
    expect(
      (await layersErrorOf(() => trainer.saveCheckpoint('/nonexistent', { keepLast: 1 } as never))).message,
    ).toContain("did you mean 'keep'?");
    await trainer.fit(x, y, { epochs: 1, batchSize: 8, verbose: 0 });
  });
});
