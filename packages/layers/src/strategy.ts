import { LayersError } from './errors';

/**
 * How a ShardedTrainer splits training state across ranks (ZeRO stages, by their PyTorch names).
 * Parameters + gradients + Adam state per rank, P trainable weights, N ranks:
 * - 'replicate' (DDP): every rank holds the full gradient and the full optimizer state; gradients
 *   are all-reduced: 16P bytes.
 * - 'shard-optimizer' (ZeRO-1): gradients are all-reduced, each rank steps only its shard and the
 *   shards are all-gathered back: 8P + 8P/N bytes.
 * - 'shard-gradients' (ZeRO-2): gradients are reduce-scattered, so a rank keeps only its shard of
 *   the averaged gradient between steps: 4P + 12P/N bytes.
 * - 'full-shard' (ZeRO-3): the weights are sharded too; each layer's weights are all-gathered
 *   just before it runs (forward and backward) and freed after: 16P/N bytes, plus the largest
 *   layer's weights and gradient (8 bytes each) while it runs. See [Note: full-shard layers].
 */
export type ShardedTrainerStrategy = 'replicate' | 'shard-optimizer' | 'shard-gradients' | 'full-shard';

/** Every ShardedTrainer strategy's name. */
export const shardedTrainerStrategies: readonly ShardedTrainerStrategy[] = [
  'replicate',
  'shard-optimizer',
  'shard-gradients',
  'full-shard',
];

/** What the runtime reads: a strategy resolved once into settings (the runtime never reads names). */
export interface StrategySettings {
  /** 'all-reduce': every rank gets the whole averaged gradient; 'reduce-scatter': only its shard. */
  readonly gradientReduction: 'all-reduce' | 'reduce-scatter';
  /** The optimizer steps this rank's 1-D shard views (true) or the full-shape views (false). */
  readonly optimizerOnShard: boolean;
  /** The whole flat gradient stays allocated between steps (ZeRO-1 and DDP keep full gradients). */
  readonly keepUnshardedGradient: boolean;
  /** Only the shard of the weights stays allocated; each layer gathers its weights to run. */
  readonly shardParameters: boolean;
}

const presets: Record<ShardedTrainerStrategy, StrategySettings> = {
  replicate: {
    gradientReduction: 'all-reduce',
    optimizerOnShard: false,
    keepUnshardedGradient: true,
    shardParameters: false,
  },
  'shard-optimizer': {
    gradientReduction: 'all-reduce',
    optimizerOnShard: true,
    keepUnshardedGradient: true,
    shardParameters: false,
  },
  'shard-gradients': {
    gradientReduction: 'reduce-scatter',
    optimizerOnShard: true,
    keepUnshardedGradient: false,
    shardParameters: false,
  },
  'full-shard': {
    gradientReduction: 'reduce-scatter',
    optimizerOnShard: true,
    keepUnshardedGradient: false,
    shardParameters: true,
  },
};

export function resolveStrategy(strategy: unknown): StrategySettings {
  if (typeof strategy === 'string' && strategy in presets) return presets[strategy as ShardedTrainerStrategy];
  throw new LayersError(`Unknown ShardedTrainer strategy ${JSON.stringify(strategy)}.`, {
    code: 'invalid-option',
    expected: shardedTrainerStrategies,
    actual: strategy,
    fix: `pick one of ${shardedTrainerStrategies.join(', ')}.`,
  });
}

/**
 * Bytes per rank the strategy's model says parameters + gradients + optimizer state take
 * (`stateBytesPerElement`: 8 for Adam/AdamW, 4 for SGD with momentum, 0 for plain SGD), for
 * `numel` trainable elements over `worldSize` ranks, the largest layer holding `largestLayer`.
 */
export function modelBytes(
  strategy: ShardedTrainerStrategy,
  numel: number,
  worldSize: number,
  stateBytesPerElement: number,
  largestLayer: number,
): number {
  const shard = numel / worldSize;
  switch (strategy) {
    case 'replicate':
      return (8 + stateBytesPerElement) * numel;
    case 'shard-optimizer':
      return 8 * numel + stateBytesPerElement * shard;
    case 'shard-gradients':
      return 4 * numel + (4 + stateBytesPerElement) * shard;
    case 'full-shard':
      return (8 + stateBytesPerElement) * shard + 8 * largestLayer;
  }
}
