/** One thread rank of the benchmark: ShardedTrainer on the example's CNN. */
import { initProcessGroup } from '@fsdp-ts/collectives';
import { ShardedTrainer, type ShardedTrainerStrategy, type TrainerMemory } from '@fsdp-ts/layers';
import { initBackend } from '@fsdp-ts/tensor';
import { makeDigits } from './digits';
import { buildModel } from './model';

export interface BenchArguments {
  /** Timed: one warm-up epoch, then one timed epoch, per strategy. */
  strategies: ShardedTrainerStrategy[];
  samples: number;
  batchSize: number;
  /** false: a few batches only, to read the memory between steps. */
  timed: boolean;
}

export interface BenchRankResult {
  strategy: ShardedTrainerStrategy;
  samplesPerSecond: number;
  /** trainer.memory() at the end of the last batch (between steps; peak since the fit began). */
  memory: TrainerMemory;
}

export async function benchRank({ args }: { args: BenchArguments }): Promise<BenchRankResult[]> {
  await initBackend('cpu');
  const group = await initProcessGroup();
  try {
    const results: BenchRankResult[] = [];
    for (const strategy of args.strategies) {
      const model = buildModel();
      const trainer = new ShardedTrainer(model, { group, strategy, optimizer: 'adam' });
      const { x, y } = makeDigits(args.samples, 1);
      let memory: TrainerMemory | null = null;
      const fitArgs = {
        batchSize: args.batchSize,
        epochs: 1,
        verbose: 0 as const,
        callbacks: {
          onBatchEnd: async () => {
            memory = trainer.memory();
          },
        },
      };
      if (args.timed) await trainer.fit(x, y, fitArgs);
      const started = performance.now();
      await trainer.fit(x, y, fitArgs);
      const seconds = (performance.now() - started) / 1000;
      results.push({ strategy, samplesPerSecond: args.samples / seconds, memory: memory! });
    }
    return results;
  } finally {
    await group.destroy();
  }
}
