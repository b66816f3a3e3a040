import { LayersError } from './errors';

/**
 * How a ShardedTrainer splits training state across ranks (ZeRO stages, by their PyTorch names):
 * - 'replicate' (DDP): every rank holds the full gradient and the full optimizer state; gradients
 *   are all-reduced. Parameters + gradients + Adam state per rank: 16 bytes per parameter.
 * - 'shard-optimizer' (ZeRO-1): gradients are all-reduced, each rank steps only its shard and the
 *   shards are all-gathered back: 8 + 8/N bytes per parameter.
 * - 'shard-gradients' (ZeRO-2): gradients are reduce-scattered, so a rank keeps only its shard of
 *   the averaged gradient between steps: 4 + 12/N bytes per parameter.
 * 'full-shard' (ZeRO-3) is not offered: see architecture/decisions/2026-12-01-layers-no-full-shard.md.
 */
export type ShardedTrainerStrategy = 'replicate' | 'shard-optimizer' | 'shard-gradients';

export const shardedTrainerStrategies: readonly ShardedTrainerStrategy[] = [
  'replicate',
  'shard-optimizer',
  'shard-gradients',
];

/** What the runtime reads: a strategy resolved once into settings (the runtime never reads names). */
export interface StrategySettings {
  /** 'all-reduce': every rank gets the whole averaged gradient; 'reduce-scatter': only its shard. */
  readonly gradientReduction: 'all-reduce' | 'reduce-scatter';
  /** The optimizer steps this rank's 1-D shard views (true) or the full-shape views (false). */
  readonly optimizerOnShard: boolean;
  /** The whole flat gradient stays allocated between steps (ZeRO-1 and DDP keep full gradients). */
  readonly keepUnshardedGradient: boolean;
}

const presets: Record<ShardedTrainerStrategy, StrategySettings> = {
  replicate: { gradientReduction: 'all-reduce', optimizerOnShard: false, keepUnshardedGradient: true },
  'shard-optimizer': { gradientReduction: 'all-reduce', optimizerOnShard: true, keepUnshardedGradient: true },
  'shard-gradients': {
    gradientReduction: 'reduce-scatter',
    optimizerOnShard: true,
    keepUnshardedGradient: false,
  },
};

export function resolveStrategy(strategy: unknown): StrategySettings {
  if (typeof strategy === 'string' && strategy in presets) return presets[strategy as ShardedTrainerStrategy];
  const fullShard = strategy === 'full-shard';
  throw new LayersError(`Unknown ShardedTrainer strategy ${JSON.stringify(strategy)}.`, {
    code: 'invalid-option',
    expected: shardedTrainerStrategies,
    actual: strategy,
    fix: fullShard
      ? "'full-shard' needs parameters freed between layers, which tf.LayersModel does not allow without forking tfjs-layers; use 'shard-gradients' (see the package README), or @fsdp-ts/fsdp with an @fsdp-ts/nn model."
      : `pick one of ${shardedTrainerStrategies.join(', ')}.`,
  });
}
