import {
  CheckpointError,
  type CheckpointLog,
  type CheckpointOptimizer,
  type FlatShard,
  type LoadedCheckpoint,
  readCheckpoint,
  type SavedLocation,
  type SavedOptimizer,
  type StatePiece,
} from '@fsdp-ts/checkpoint';
import { describeGroups, type OptimizerLoadTargets } from '@fsdp-ts/checkpoint/internal';
import type { OptionKeys } from '@fsdp-ts/errors';
import type { OptimizerStateDict, ParameterStateEntry } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import { checkFsdpOptionKeys } from '../internal/check-option-keys';
import { fsdpRuntime } from '../internal/wrapper-runtime';
import type { OffloadedOptimizerState } from '../offload/offloaded-optimizer-state';
import { checkpointShards, parameterShards } from './model-shards';
import { stageModuleBuffers } from './module-buffers';

export type { LoadedCheckpoint } from '@fsdp-ts/checkpoint';

/** Options of loadCheckpoint. */
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

/** The keys of LoadCheckpointOptions ([Note: option keys] in @fsdp-ts/errors). */
export const loadCheckpointOptionKeys = {
  model: true,
  optimizer: true,
  log: true,
} as const satisfies OptionKeys<LoadCheckpointOptions>;

/**
 * Loads a checkpoint (a step directory, or a root holding `latest`) into an FSDP model and
 * optimizer at any world size (collective): the model is described as its flat shards
 * ([Note: sharded model state]) and filled by readCheckpoint, straight into the shards and the
 * optimizer's state arrays ([Note: checkpoints stream the optimizer state]). Nothing changes
 * unless every rank read and checked everything it needs; after the ranks agree, the second pass
 * copies into place and can still fail part-way: if a file changes between the two passes (every
 * rank then throws, saying the load was partial) or if the optimizer's loadStateDict throws.
 */
export function loadCheckpoint(path: string, options: LoadCheckpointOptions): LoadedCheckpoint {
  checkFsdpOptionKeys('loadCheckpoint', options, loadCheckpointOptionKeys);
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
            prepare: (saved, matched) => {
              const offload = model[fsdpRuntime].optimizerStateOffload;
              return offload?.optimizer === optimizer
                ? offloadedOptimizerTargets(optimizer, offload, locations!, saved, matched)
                : optimizerTargets(optimizer, locations!, saved, matched);
            },
          },
        }),
  });
}

/**
 * Where `parameter` lives in this rank's shards and the state saved for it (undefined when none
 * was saved); a Parameter the model does not manage is an 'optimizer-mismatch'.
 */
function savedStateOf(
  parameter: Parameter,
  locations: ReadonlyMap<Parameter, { shard: FlatShard; index: number }>,
  saved: SavedOptimizer,
  matched: ReadonlyMap<string, SavedLocation>,
):
  | {
      shard: FlatShard;
      savedState: SavedOptimizer['parameters'][string];
      offsetInShard: number;
      length: number;
    }
  | undefined {
  const location = locations.get(parameter);
  if (location === undefined) {
    throw new CheckpointError(`The optimizer steps ${parameter}, which the FSDP model does not manage.`, {
      reason: 'optimizer-mismatch',
      fix: 'build the optimizer from the wrapped model (parameters of ignored modules are not checkpointed).',
    });
  }
  const { shard, index } = location;
  const savedState = saved.parameters[matched.get(shard.layout.parameters[index]!.names[0]!)!.name];
  if (savedState === undefined) return undefined;
  const { offsetInShard, length } = shard.intersections[index]!;
  return { shard, savedState, offsetInShard, length };
}

/**
 * This rank's optimizer state dict with the arrays the saved state is read into: the optimizer's
 * live buffer where it has one of the right size (overwritten in place), else a new one, handed
 * over without copies. Parameters without saved state get none.
 */
function optimizerTargets(
  optimizer: CheckpointOptimizer,
  locations: ReadonlyMap<Parameter, { shard: FlatShard; index: number }>,
  saved: SavedOptimizer,
  matched: ReadonlyMap<string, SavedLocation>,
): OptimizerLoadTargets {
  const live = optimizer.stateDict({ copy: false }).state;
  const state: Record<number, ParameterStateEntry> = {};
  const pieces = new Map<FlatShard, Map<string, StatePiece[]>>();
  optimizer.parameters.forEach((parameter, position) => {
    const found = savedStateOf(parameter, locations, saved, matched);
    if (found === undefined) return;
    const { shard, savedState, offsetInShard, length } = found;
    const buffers: Record<string, Float32Array> = {};
    const shardPieces = pieces.get(shard) ?? new Map<string, StatePiece[]>();
    pieces.set(shard, shardPieces);
    for (const name of savedState.buffers) {
      const current = live[position]?.buffers[name];
      const values =
        current instanceof Float32Array && current.length === length ? current : new Float32Array(length);
      buffers[name] = values;
      const list = shardPieces.get(name) ?? [];
      list.push({ offset: offsetInShard, values });
      shardPieces.set(name, list);
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
  const dict: OptimizerStateDict = {
    format: 'fsdp-ts/optim-state@1',
    optimizer: optimizer.kind,
    state,
    paramGroups,
  };
  // Handed over before the arrays are filled, so the optimizer's checks run before any live
  // buffer is overwritten. An optimizer that copies anyway (it ignores `copy`) gets the filled
  // arrays again afterwards.
  let adopted = true;
  return {
    pieces,
    commit: () => {
      optimizer.loadStateDict(dict, { copy: false });
      adopted = adoptedAll(optimizer.stateDict({ copy: false }), dict);
    },
    finish: () => {
      if (!adopted) optimizer.loadStateDict(dict);
    },
  };
}

/**
 * The targets of an optimizer whose state is offloaded ([Note: offloaded state in checkpoints]):
 * the saved buffers are read, chunk by chunk of the offload, into views of its resident buffer
 * and written into its store ([Note: loads in batches]); the optimizer gets the steps and the
 * hyperparameters alone ([Note: state dicts without buffers] in @fsdp-ts/optim).
 */
function offloadedOptimizerTargets(
  optimizer: CheckpointOptimizer,
  offload: OffloadedOptimizerState,
  locations: ReadonlyMap<Parameter, { shard: FlatShard; index: number }>,
  saved: SavedOptimizer,
  matched: ReadonlyMap<string, SavedLocation>,
): OptimizerLoadTargets {
  offload.prepareLoad();
  const state: Record<number, ParameterStateEntry> = {};
  const pieces = new Map<FlatShard, Map<string, StatePiece[]>>();
  const batchOf = new Map<Float32Array, number>();
  optimizer.parameters.forEach((parameter, position) => {
    const found = savedStateOf(parameter, locations, saved, matched);
    if (found === undefined) return;
    const { shard, savedState, offsetInShard, length } = found;
    const entry = offload.entry(position);
    const shardPieces = pieces.get(shard) ?? new Map<string, StatePiece[]>();
    pieces.set(shard, shardPieces);
    for (const name of savedState.buffers) {
      if (!entry.names.includes(name) || entry.numel !== length) {
        throw new CheckpointError(
          `The checkpoint holds '${name}' state (${length} elements here) for ${parameter}; the offloaded ${optimizer.kind} keeps ${entry.names.join(', ')} of ${entry.numel}.`,
          {
            reason: 'optimizer-mismatch',
            expected: { buffers: entry.names, numel: entry.numel },
            actual: { buffer: name, numel: length },
            fix: 'build the optimizer as when saving (same kind, same options such as amsgrad).',
          },
        );
      }
      const values = offload.loadTarget(position, name);
      if (values.length > 0) batchOf.set(values, entry.chunk);
      const list = shardPieces.get(name) ?? [];
      list.push({ offset: offsetInShard, values });
      shardPieces.set(name, list);
    }
    state[position] = {
      name: parameter.name,
      shape: [...parameter.shape],
      numel: length,
      step: savedState.step,
      buffers: {},
    };
  });
  let position = 0;
  const dict: OptimizerStateDict = {
    format: 'fsdp-ts/optim-state@1',
    optimizer: optimizer.kind,
    state,
    paramGroups: describeGroups(optimizer).map((group, index) => ({
      hyperparameters: saved.groups[index]!.hyperparameters,
      params: group.paramNames.map(() => position++),
      paramNames: group.paramNames,
    })),
  };
  return {
    pieces,
    batches: {
      count: offload.chunkCount,
      batchOf: (values) => batchOf.get(values)!,
      begin: (chunk) => offload.beginLoadChunk(chunk),
      end: (chunk) => offload.endLoadChunk(chunk),
    },
    commit: () => optimizer.loadStateDict(dict, { buffers: false }),
    finish: () => offload.finishLoad(),
  };
}

/** Whether the optimizer holds the very arrays of `dict` (it honoured `copy: false`). */
function adoptedAll(current: OptimizerStateDict, dict: OptimizerStateDict): boolean {
  return Object.entries(dict.state).every(([position, entry]) =>
    Object.entries(entry.buffers).every(
      ([name, values]) => current.state[Number(position)]?.buffers[name] === values,
    ),
  );
}
