import type { OptimizerStateDict, ParameterStateEntry } from '@fsdp-ts/optim';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import type { CheckpointLog } from './checkpoint-directory';
import { CheckpointError } from './checkpoint-error';
import type { CheckpointMetadata } from './checkpoint-format';
import { readCheckpointMetadata, resolveCheckpointDirectory } from './checkpoint-metadata';
import { matchParameters, planBufferReads, type SavedLocation } from './checkpoint-read-plan';
import { throwIfAnyRankFailed } from './group-agreement';
import { type ModelHandle, modelHandles, parameterLocations } from './model-shards';
import { type CheckpointOptimizer, describeGroups } from './optimizer-state';
import { executeReads, type PlannedRead } from './verified-range-reader';
import { verifyOwnedFiles } from './verify-unread-blocks';

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

export interface LoadedCheckpoint {
  /** The step directory loaded. */
  path: string;
  step: number;
  /** What was passed as `extra` to saveCheckpoint. */
  extra: unknown;
  /** The world size the checkpoint was saved at. */
  savedWorldSize: number;
  /** Bytes this rank read from data files. */
  bytesRead: number;
}

interface Staged {
  parameters: Map<ModelHandle, Float32Array>;
  optimizer: OptimizerStateDict | null;
  bytesRead: number;
}

/**
 * Loads a checkpoint (a step directory, or a root holding `latest`) into the model and optimizer at
 * any world size (collective). Each rank reads only the verified blocks holding its shards. Nothing
 * changes unless every rank read and checked everything it needs; otherwise every rank throws a
 * CheckpointError (the failing rank's names the file and the parameter).
 */
export function loadCheckpoint(path: string, options: LoadCheckpointOptions): LoadedCheckpoint {
  const { model, optimizer } = options;
  let directory = path;
  let metadata: CheckpointMetadata | undefined;
  let staged: Staged | undefined;
  let handles: ModelHandle[] = [];
  let localError: unknown;
  try {
    directory = resolveCheckpointDirectory(path, options.log);
    metadata = readCheckpointMetadata(directory);
    handles = modelHandles(model);
    staged = stage(directory, metadata, handles, optimizer, model.group);
  } catch (error) {
    localError = error;
  }
  throwIfAnyRankFailed(model.group, localError, `Loading checkpoint ${path}`);
  for (const [entry, values] of staged!.parameters) entry.data.set(values);
  if (optimizer !== undefined && staged!.optimizer !== null) optimizer.loadStateDict(staged!.optimizer);
  return {
    path: directory,
    step: metadata!.step,
    extra: metadata!.extra,
    savedWorldSize: metadata!.worldSize,
    bytesRead: staged!.bytesRead,
  };
}

function stage(
  directory: string,
  metadata: CheckpointMetadata,
  handles: readonly ModelHandle[],
  optimizer: CheckpointOptimizer | undefined,
  group: { rank: number; size: number },
): Staged {
  const matched = matchParameters(directory, metadata, handles);
  const reads: PlannedRead[] = [];
  const parameters = new Map<ModelHandle, Float32Array>();
  for (const entry of handles) {
    const target = new Float32Array(entry.data.length);
    parameters.set(entry, target);
    reads.push(...planBufferReads(directory, metadata, entry, 'parameters', target, matched));
  }
  const flatState = new Map<ModelHandle, Map<string, Float32Array>>();
  if (optimizer !== undefined) {
    const saved = checkOptimizer(directory, metadata, optimizer);
    for (const entry of handles) {
      const buffers = new Map<string, Float32Array>();
      const names = new Set(
        entry.handle.layout.parameters.flatMap(
          (parameter) => saved.parameters[matched.get(parameter.names[0]!)!.name]?.buffers ?? [],
        ),
      );
      for (const name of names) {
        const target = new Float32Array(entry.data.length);
        buffers.set(name, target);
        const hasBuffer = (location: SavedLocation) =>
          saved.parameters[location.name]?.buffers.includes(name) ?? false;
        reads.push(...planBufferReads(directory, metadata, entry, name, target, matched, hasBuffer));
      }
      flatState.set(entry, buffers);
    }
  }
  let bytesRead = executeReads(directory, reads);
  bytesRead += verifyOwnedFiles(directory, metadata, reads, group.rank, group.size);
  const dict =
    optimizer === undefined ? null : optimizerDict(metadata, optimizer, handles, matched, flatState);
  return { parameters, optimizer: dict, bytesRead };
}

function checkOptimizer(
  directory: string,
  metadata: CheckpointMetadata,
  optimizer: CheckpointOptimizer,
): NonNullable<CheckpointMetadata['optimizer']> {
  const saved = metadata.optimizer;
  const current = describeGroups(optimizer);
  const problem =
    saved === null
      ? 'the checkpoint holds no optimizer state'
      : saved.kind !== optimizer.kind
        ? `it was saved from ${saved.kind}, the optimizer is ${optimizer.kind}`
        : saved.groups.length !== current.length ||
            saved.groups.some((group, index) => group.paramNames.length !== current[index]!.paramNames.length)
          ? `its param groups have ${saved.groups.map((group) => group.paramNames.length).join('/')} parameters, the optimizer's ${current.map((group) => group.paramNames.length).join('/')}`
          : null;
  if (problem !== null) {
    throw new CheckpointError(`Cannot load the optimizer state of ${directory}: ${problem}.`, {
      reason: 'optimizer-mismatch',
      file: directory,
      fix: 'build the optimizer as when saving (same kind, same groups), or load without `optimizer`.',
    });
  }
  return saved!;
}

/** This rank's optimizer state dict: the saved hyperparameters, state sliced from the flat buffers. */
function optimizerDict(
  metadata: CheckpointMetadata,
  optimizer: CheckpointOptimizer,
  handles: readonly ModelHandle[],
  matched: ReadonlyMap<string, SavedLocation>,
  flatState: ReadonlyMap<ModelHandle, Map<string, Float32Array>>,
): OptimizerStateDict {
  const saved = metadata.optimizer!;
  const locations = parameterLocations(handles);
  const state: Record<number, ParameterStateEntry> = {};
  optimizer.parameters.forEach((parameter, position) => {
    const location = locations.get(parameter);
    if (location === undefined) {
      throw new CheckpointError(`The optimizer steps ${parameter}, which the FSDP model does not manage.`, {
        reason: 'optimizer-mismatch',
        fix: 'build the optimizer from the wrapped model (parameters of ignored modules are not checkpointed).',
      });
    }
    const { entry, index } = location;
    const savedName = matched.get(entry.handle.layout.parameters[index]!.names[0]!)!.name;
    const savedState = saved.parameters[savedName];
    if (savedState === undefined) return;
    const { offsetInShard, length } = entry.handle.intersections[index]!;
    const buffers: Record<string, Float32Array> = {};
    for (const name of savedState.buffers) {
      buffers[name] = flatState
        .get(entry)!
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
