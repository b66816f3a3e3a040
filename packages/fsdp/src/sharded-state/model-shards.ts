import type { Parameter } from '@fsdp-ts/tensor';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import { type FlatShard, flatShard, type ShardedModelState } from './flat-shard';

/**
 * The wrapped model's sharded state ([Note: sharded model state]): every unit's flat parameters
 * in unit order, each with this rank's slice. Sharded strategies expose each handle's shard; under
 * no-shard the handle's layout has world size 1, the slice is the unsharded buffer, and only rank
 * 0 writes it. The one walk over handles behind checkpoints and sharded state dicts.
 */
export function modelShards(model: FullyShardedDataParallel): ShardedModelState {
  const noShard = !model.options.sharding.shardParameters;
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
