import type { FlatParamHandle } from '@fsdp-ts/flat-param';
import type { Parameter } from '@fsdp-ts/tensor';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import { CheckpointError } from './checkpoint-error';

/** One handle of the wrapped model, with what a checkpoint needs to know about it. */
export interface ModelHandle {
  unit: string;
  index: number;
  handle: FlatParamHandle;
  /** This rank's slice of the flat parameter in the handle's layout (the live memory). */
  data: Float32Array;
  /** Whether this rank writes the slice (no-shard: only rank 0 of the group does). */
  writes: boolean;
}

/**
 * The wrapped model's handles in unit order. Sharded strategies expose each handle's shard; under
 * no-shard the handle's layout has world size 1 and the live memory is the unsharded buffer.
 * Every unit must be at rest (sharded, or no-shard): not inside forward or backward.
 */
export function modelHandles(model: FullyShardedDataParallel): ModelHandle[] {
  const { sharding } = model.options;
  if (sharding.replicateGroup !== null) {
    throw new CheckpointError('Checkpoints of hybrid-shard models are not supported yet.', {
      reason: 'io',
      expected: 'a strategy without a replicate group',
      actual: sharding.name,
      fix: 'save through fullStateDict / shardedStateDict, or wrap with full-shard for checkpointing.',
    });
  }
  const noShard = !sharding.shardParameters;
  const result: ModelHandle[] = [];
  for (const unit of model.units) {
    if (!noShard && unit.state !== 'sharded') {
      throw new CheckpointError(`${unit.label} is '${unit.state}'; a checkpoint needs every unit sharded.`, {
        reason: 'io',
        expected: 'sharded',
        actual: unit.state,
        fix: 'save or load between steps, not inside forward, backward or summonFullParams.',
      });
    }
    unit.handles.forEach((handle, index) => {
      if (handle.layout.dtype !== 'float32') {
        throw new CheckpointError(`${unit.label} holds ${handle.layout.dtype} parameters.`, {
          reason: 'model-mismatch',
          expected: 'float32 flat parameters',
          actual: handle.layout.dtype,
          fix: 'keep float32 master parameters (mixed precision casts copies for compute).',
        });
      }
      const data = handle.localBuffer().typedArray() as Float32Array;
      result.push({ unit: unit.name, index, handle, data, writes: !noShard || model.group.rank === 0 });
    });
  }
  return result;
}

/** The handle and layout index of every Parameter the model manages. */
export function parameterLocations(
  handles: readonly ModelHandle[],
): Map<Parameter, { entry: ModelHandle; index: number }> {
  const locations = new Map<Parameter, { entry: ModelHandle; index: number }>();
  for (const entry of handles) {
    entry.handle.parameters.forEach((parameter, index) => {
      locations.set(parameter, { entry, index });
    });
  }
  return locations;
}
