import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import type { ShardedModelState } from '../sharded-state/flat-shard';
import { modelShards } from '../sharded-state/model-shards';
import { CheckpointError } from './checkpoint-error';

/**
 * The wrapped model's sharded state for a checkpoint (see [Note: sharded model state]), after the
 * checks a checkpoint needs: no replicate group, every unit at rest (sharded, or no-shard: not
 * inside forward or backward), float32 flat parameters.
 */
export function checkpointShards(model: FullyShardedDataParallel): ShardedModelState {
  const { sharding } = model.options;
  if (sharding.replicateGroup !== null) {
    throw new CheckpointError('Checkpoints of hybrid-shard models are not supported yet.', {
      reason: 'invalid-input',
      expected: 'a strategy without a replicate group',
      actual: sharding.name,
      fix: 'save through fullStateDict / shardedStateDict, or wrap with full-shard for checkpointing.',
    });
  }
  for (const unit of model.units) {
    if (sharding.shardParameters && unit.state !== 'sharded') {
      throw new CheckpointError(`${unit.label} is '${unit.state}'; a checkpoint needs every unit sharded.`, {
        reason: 'invalid-input',
        expected: 'sharded',
        actual: unit.state,
        fix: 'save or load between steps, not inside forward, backward or summonFullParams.',
      });
    }
    for (const handle of unit.handles) {
      if (handle.layout.dtype !== 'float32') {
        throw new CheckpointError(`${unit.label} holds ${handle.layout.dtype} parameters.`, {
          reason: 'model-mismatch',
          expected: 'float32 flat parameters',
          actual: handle.layout.dtype,
          fix: 'keep float32 master parameters (mixed precision casts copies for compute).',
        });
      }
    }
  }
  return modelShards(model);
}
