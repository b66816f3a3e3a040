import { CheckpointError, type FlatShard, flatShard, type ShardedModelState } from '@fsdp-ts/checkpoint';
import type { Parameter } from '@fsdp-ts/tensor';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';

/**
 * The wrapped model's sharded state ([Note: sharded model state]): every unit's flat parameters
 * in unit order, each with this rank's slice. Sharded strategies expose each handle's shard; under
 * no-shard the handle's layout has world size 1, the slice is the unsharded buffer, and only rank
 * 0 writes it. The one walk over handles behind checkpoints and sharded state dicts.
 */
export function modelShards(model: FullyShardedDataParallel): ShardedModelState {
  const noShard = !model.options.sharding.shardParameters;
  // [Note: offloaded parameters]: the shards are read back before anything views them.
  model.residentParameterShards();
  const shards: FlatShard[] = [];
  for (const unit of model.units) {
    unit.handles.forEach((handle, index) => {
      const data = handle.localBuffer().typedArray() as Float32Array;
      shards.push(
        flatShard({
          unit: unit.name,
          index,
          layout: handle.layout,
          rank: handle.rank,
          data: data.subarray(0, handle.layout.shardNumel),
          writes: !noShard || model.group.rank === 0,
        }),
      );
    });
  }
  return {
    shards,
    shardWorldSize: shards[0]?.layout.worldSize ?? model.group.size,
    shardingStrategy: model.options.shardingStrategy,
  };
}

/** Where each managed Parameter is in `state` (made by modelShards(model)): its flat shard and layout index. */
export function parameterShards(
  model: FullyShardedDataParallel,
  state: ShardedModelState,
): Map<Parameter, { shard: FlatShard; index: number }> {
  const locations = new Map<Parameter, { shard: FlatShard; index: number }>();
  let position = 0;
  for (const unit of model.units) {
    for (const handle of unit.handles) {
      const shard = state.shards[position++]!;
      handle.parameters.forEach((parameter, index) => {
        locations.set(parameter, { shard, index });
      });
    }
  }
  return locations;
}

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
