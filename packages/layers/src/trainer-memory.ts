import type { BaseOptions, Optimizer } from '@fsdp-ts/optim';
import type { MemoryMeter } from './internal/memory-meter';
import type { WeightBucket } from './internal/weight-bucket';
import { modelBytes, type ShardedTrainerStrategy, type StrategySettings } from './strategy';

/**
 * What one rank holds for training (bytes), from `ShardedTrainer.memory()`. Parameters, gradients
 * and optimizer state only: activations, tfjs's own gradient tensors during a step and the
 * runtime come on top (as in @fsdp-ts/fsdp's [Note: memory model]).
 */
export interface TrainerMemory {
  strategy: ShardedTrainerStrategy;
  trainableParameters: number;
  worldSize: number;
  /** The buckets' flat buffers now: weights (cpu: the variables' own memory), gradients, shards. */
  buffers: number;
  optimizerState: number;
  /** Weights the tfjs backend holds in its own memory as well (backends that copy, e.g. wasm); 0 on cpu. */
  variableCopies: number;
  /** buffers + optimizerState + variableCopies. */
  total: number;
  /** The most held at once since the last fit began (same parts). */
  peak: number;
  /**
   * The strategy's model: replicate 16P, shard-optimizer 8P + 8P/N, shard-gradients 4P + 12P/N,
   * full-shard 16P/N + 8 bytes per element of the largest layer (its weights and gradient while
   * it runs); Adam's 8 bytes of state per element (SGD's fewer).
   */
  model: number;
  /** total / model (peak / model under 'full-shard'). */
  ratio: number;
  /** ratio ≤ 1.1 (within 10% of the model). */
  met: boolean;
}

/** What `measureTrainerMemory` reads of a trainer. */
export interface TrainerMemorySources {
  readonly strategy: ShardedTrainerStrategy;
  readonly settings: StrategySettings;
  readonly worldSize: number;
  readonly optimizer: Optimizer<BaseOptions>;
  readonly buckets: readonly WeightBucket[];
  readonly meter: MemoryMeter;
  /** 'full-shard': layers are gathered while they run, so the peak is what the model bounds. */
  readonly gathersLayers: boolean;
}

/** The trainer's bytes now and at their peak, against its strategy's model (see TrainerMemory). */
export function measureTrainerMemory(sources: TrainerMemorySources): TrainerMemory {
  const { strategy, settings, worldSize, optimizer, buckets, meter, gathersLayers } = sources;
  const optimizerState = Object.values(optimizer.stateDict().state).reduce(
    (sum, entry) =>
      sum + Object.values(entry.buffers).reduce((bytes, buffer) => bytes + buffer.byteLength, 0),
    0,
  );
  const numel = buckets.reduce((sum, bucket) => sum + bucket.numel, 0);
  const largestLayer = gathersLayers ? Math.max(...buckets.map((bucket) => bucket.paddedNumel)) : 0;
  const stateBytesPerElement =
    numel === 0 ? 0 : Math.round(optimizerState / (settings.optimizerOnShard ? numel / worldSize : numel));
  const variableCopies = buckets.reduce((sum, bucket) => sum + bucket.variableCopyBytes(), 0);
  const current = meter.current + optimizerState + variableCopies;
  const peak = meter.peak + optimizerState + variableCopies;
  const model = modelBytes(strategy, numel, worldSize, stateBytesPerElement, largestLayer);
  const measured = gathersLayers ? peak : current;
  return {
    strategy,
    trainableParameters: numel,
    worldSize,
    buffers: meter.current,
    optimizerState,
    variableCopies,
    total: current,
    peak,
    model,
    ratio: measured / model,
    met: measured <= 1.1 * model,
  };
}
