import type { ShardingPreset } from '@fsdp-ts/fsdp';

/**
 * A test-only sharding strategy, added through CONTRIBUTING's "add a sharding strategy" recipe:
 * gradients and optimizer state sharded, each unit's parameters gathered once for forward and kept
 * until its gradients are reduced (as shard-grad-op), and activations recomputed in backward (as
 * full-shard). Fewer all-gathers than full-shard, less activation memory than shard-grad-op.
 * The parity test trains with it against the unwrapped reference.
 */
export const keepGatheredRecompute: ShardingPreset = {
  name: 'test-keep-gathered-recompute',
  gradientReduction: 'reduce-scatter',
  reshardAfterForward: false,
  recompute: true,
  replicate: false,
};
