/** One thread rank of the benchmark: ShardedTrainer on the example's CNN. */
import { initProcessGroup } from '@fsdp-ts/collectives';
import { ShardedTrainer, type ShardedTrainerStrategy } from '@fsdp-ts/layers';
import { initBackend } from '@fsdp-ts/tensor';
import { makeDigits } from './digits';
import { buildModel } from './model';

export interface BenchArguments {
  strategy: ShardedTrainerStrategy;
  samples: number;
  batchSize: number;
}

export interface BenchRankResult {
  samplesPerSecond: number;
  memory: ReturnType<ShardedTrainer['memory']>;
  trainableParameters: number;
}

export async function benchRank({ args }: { args: BenchArguments }): Promise<BenchRankResult> {
  await initBackend('cpu');
  const group = await initProcessGroup();
  try {
    const model = buildModel();
    const trainer = new ShardedTrainer(model, { group, strategy: args.strategy, optimizer: 'adam' });
    const { x, y } = makeDigits(args.samples, 1);
    await trainer.fit(x, y, { batchSize: args.batchSize, epochs: 1, verbose: 0 });
    const started = performance.now();
    await trainer.fit(x, y, { batchSize: args.batchSize, epochs: 1, verbose: 0 });
    const seconds = (performance.now() - started) / 1000;
    const trainableParameters = model.trainableWeights.reduce((sum, weight) => sum + weight.read().size, 0);
    return { samplesPerSecond: args.samples / seconds, memory: trainer.memory(), trainableParameters };
  } finally {
    await group.destroy();
  }
}
