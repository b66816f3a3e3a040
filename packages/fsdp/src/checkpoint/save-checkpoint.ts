import {
  type CheckpointOptimizer,
  type SavedCheckpoint,
  type WriteCheckpointOptions,
  writeCheckpoint,
} from '@fsdp-ts/checkpoint';
import { flattenOptimizerState } from '@fsdp-ts/checkpoint/internal';
import type { OptionKeys } from '@fsdp-ts/errors';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import { checkFsdpOptionKeys } from '../internal/check-option-keys';
import { fsdpRuntime } from '../internal/wrapper-runtime';
import { checkpointShards, parameterShards } from './model-shards';
import { moduleBuffers } from './module-buffers';

export type { SavedCheckpoint } from '@fsdp-ts/checkpoint';

/** Options of saveCheckpoint. */
export interface SaveCheckpointOptions extends Omit<WriteCheckpointOptions, 'group' | 'model' | 'optimizer'> {
  model: FullyShardedDataParallel;
  /** Its state is saved sharded like the parameters. */
  optimizer?: CheckpointOptimizer;
}

/** The keys of SaveCheckpointOptions ([Note: option keys] in @fsdp-ts/errors). */
const saveCheckpointOptionKeys = {
  model: true,
  optimizer: true,
  step: true,
  extra: true,
  buffers: true,
  documents: true,
  keep: true,
  blockBytes: true,
} as const satisfies OptionKeys<SaveCheckpointOptions>;

/**
 * Saves a checkpoint of an FSDP model (and optimizer) under `root/step-NNNNNNNN/`. Collective:
 * every rank calls it with the same step. The model is described as its flat shards
 * ([Note: sharded model state]) and written by writeCheckpoint; offloaded optimizer state is
 * streamed from its store ([Note: offloaded state in checkpoints]), the same bytes as without
 * offload.
 */
export function saveCheckpoint(root: string, options: SaveCheckpointOptions): SavedCheckpoint {
  checkFsdpOptionKeys('saveCheckpoint', options, saveCheckpointOptionKeys);
  const { model, optimizer, ...rest } = options;
  const state = checkpointShards(model);
  return writeCheckpoint(root, {
    ...rest,
    group: model.group,
    model: state,
    buffers: { ...moduleBuffers(model), ...rest.buffers },
    ...(optimizer === undefined
      ? {}
      : {
          optimizer: () => {
            const offload = model[fsdpRuntime].optimizerStateOffload;
            const source = offload?.optimizer === optimizer ? offload.checkpointSource() : undefined;
            return flattenOptimizerState(optimizer, parameterShards(model, state), source);
          },
        }),
  });
}
