import type { ShardedTrainerStrategy } from './strategy';

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
