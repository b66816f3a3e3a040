import type { OptimizerStateDict, ParameterStateEntry } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import type { FlatShard } from '../sharded-state/flat-shard';
import { parameterShards } from '../sharded-state/model-shards';
import type { CheckpointLog } from './checkpoint-directory';
import { CheckpointError } from './checkpoint-error';
import { checkpointShards } from './model-shards';
import { stageModuleBuffers } from './module-buffers';
import { type CheckpointOptimizer, describeGroups } from './optimizer-state';
import { type LoadedCheckpoint, readCheckpoint, type StagedOptimizerState } from './read-checkpoint';

export type { LoadedCheckpoint } from './read-checkpoint';

export interface LoadCheckpointOptions {
  model: FullyShardedDataParallel;
  /** Receives the saved optimizer state for this rank's shards (and the saved hyperparameters). */
  optimizer?: CheckpointOptimizer;
  /**
   * Receives the line logged when `latest` under a root is damaged and an older checkpoint is
   * loaded instead (default: console.warn).
   */
  log?: CheckpointLog;
}

/**
 * Loads a checkpoint (a step directory, or a root holding `latest`) into an FSDP model and
 * optimizer at any world size (collective): the model is described as its flat shards
 * ([Note: sharded model state]) and filled by readCheckpoint. Nothing changes unless every rank
 * read and checked everything it needs.
 */
export function loadCheckpoint(path: string, options: LoadCheckpointOptions): LoadedCheckpoint {
  const { model, optimizer, log } = options;
  let locations: Map<Parameter, { shard: FlatShard; index: number }> | undefined;
  const describe = () => {
    const state = checkpointShards(model);
    locations = parameterShards(model, state);
    return state;
  };
  return readCheckpoint(path, {
    group: model.group,
    model: describe,
    replicated: stageModuleBuffers(model),
    ...(log === undefined ? {} : { log }),
    ...(optimizer === undefined
      ? {}
      : {
          optimizer: {
            kind: optimizer.kind,
            groups: describeGroups(optimizer),
            stage: (staged: StagedOptimizerState) => {
              const dict = optimizerDict(optimizer, locations!, staged);
              return () => optimizer.loadStateDict(dict);
            },
          },
        }),
  });
}

/** This rank's optimizer state dict: the saved hyperparameters, state sliced from the flat buffers. */
function optimizerDict(
  optimizer: CheckpointOptimizer,
  locations: ReadonlyMap<Parameter, { shard: FlatShard; index: number }>,
  staged: StagedOptimizerState,
): OptimizerStateDict {
  const { saved, buffers: flatState, matched } = staged;
  const state: Record<number, ParameterStateEntry> = {};
  optimizer.parameters.forEach((parameter, position) => {
    const location = locations.get(parameter);
    if (location === undefined) {
      throw new CheckpointError(`The optimizer steps ${parameter}, which the FSDP model does not manage.`, {
        reason: 'optimizer-mismatch',
        fix: 'build the optimizer from the wrapped model (parameters of ignored modules are not checkpointed).',
      });
    }
    const { shard, index } = location;
    const savedName = matched.get(shard.layout.parameters[index]!.names[0]!)!.name;
    const savedState = saved.parameters[savedName];
    if (savedState === undefined) return;
    const { offsetInShard, length } = shard.intersections[index]!;
    const buffers: Record<string, Float32Array> = {};
    for (const name of savedState.buffers) {
      buffers[name] = flatState
        .get(shard)!
        .get(name)!
        .slice(offsetInShard, offsetInShard + length);
    }
    state[position] = {
      name: parameter.name,
      shape: [...parameter.shape],
      numel: length,
      step: savedState.step,
      buffers,
    };
  });
  // [Note: optimizer state dict positions] positions number the parameters group by group, in order.
  let position = 0;
  const paramGroups = describeGroups(optimizer).map((group, index) => ({
    hyperparameters: saved.groups[index]!.hyperparameters,
    params: group.paramNames.map(() => position++),
    paramNames: group.paramNames,
  }));
  return { format: 'fsdp-ts/optim-state@1', optimizer: optimizer.kind, state, paramGroups };
}
