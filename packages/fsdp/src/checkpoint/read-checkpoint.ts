import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { FlatShard, ShardedModelState } from '../sharded-state/flat-shard';
import type { CheckpointLog } from './checkpoint-directory';
import { CheckpointError } from './checkpoint-error';
import type { CheckpointMetadata, SavedOptimizer } from './checkpoint-format';
import { readCheckpointMetadata, resolveCheckpointDirectory } from './checkpoint-metadata';
import { matchParameters, planBufferReads, type SavedLocation } from './checkpoint-read-plan';
import { throwIfAnyRankFailed } from './group-agreement';
import type { OptimizerGroupDescription } from './optimizer-state';
import { type ReplicatedState, readReplicatedState } from './replicated-state';
import { executeReads, type PlannedRead } from './verified-range-reader';
import { verifyOwnedFiles } from './verify-unread-blocks';

/** The optimizer state read for this rank's flat shards, before anything is loaded. */
export interface StagedOptimizerState {
  readonly saved: SavedOptimizer;
  /** Per flat shard, per state buffer: values laid out like the shard's slice (zeros where no state). */
  readonly buffers: ReadonlyMap<FlatShard, ReadonlyMap<string, Float32Array>>;
  /** Where each current parameter (by first name) is in the checkpoint. */
  readonly matched: ReadonlyMap<string, SavedLocation>;
}

/** The optimizer a checkpoint's state is read for, described without the optimizer. */
export interface OptimizerReader {
  readonly kind: string;
  readonly groups: readonly OptimizerGroupDescription[];
  /**
   * Prepares the load from the staged state (may throw: it runs before the ranks agree) and
   * returns what applies it once every rank succeeded.
   */
  stage(staged: StagedOptimizerState): () => void;
}

export interface ReadCheckpointOptions {
  group: ProcessGroup;
  /**
   * The flat shards to fill (see [Note: sharded model state]); a function is called inside the
   * load's failure agreement, so a rank that cannot describe its state fails every rank.
   */
  model: ShardedModelState | (() => ShardedModelState);
  optimizer?: OptimizerReader;
  /**
   * Receives the checkpoint's buffers and documents before the ranks agree (it may throw, e.g. for
   * a buffer the model lacks, and so fail the load on every rank) and returns what applies them
   * once every rank succeeded. They are also returned by readCheckpoint.
   */
  replicated?: (state: ReplicatedState) => () => void;
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
  /** Buffers and documents (see [Note: replicated state]); empty for format versions 1 and 2. */
  buffers: ReplicatedState['buffers'];
  documents: ReplicatedState['documents'];
  /** Bytes this rank read from data files. */
  bytesRead: number;
}

interface Staged {
  parameters: Map<FlatShard, Float32Array>;
  commitOptimizer: (() => void) | null;
  replicated: ReplicatedState;
  commitReplicated: (() => void) | null;
  bytesRead: number;
}

/**
 * Reads a checkpoint (a step directory, or a root holding `latest`) into flat shards at any world
 * size (collective). Each rank reads only the verified blocks holding its shards. Nothing changes
 * unless every rank read and checked everything it needs; otherwise every rank throws a
 * CheckpointError (the failing rank's names the file and the parameter). Knows nothing of FSDP:
 * loadCheckpoint describes the model and calls it.
 */
export function readCheckpoint(path: string, options: ReadCheckpointOptions): LoadedCheckpoint {
  const { group, optimizer } = options;
  let directory = path;
  let metadata: CheckpointMetadata | undefined;
  let staged: Staged | undefined;
  let localError: unknown;
  try {
    directory = resolveCheckpointDirectory(path, options.log);
    metadata = readCheckpointMetadata(directory);
    const model = typeof options.model === 'function' ? options.model() : options.model;
    staged = stage(directory, metadata, model.shards, optimizer, group);
    staged.commitReplicated = options.replicated?.(staged.replicated) ?? null;
  } catch (error) {
    localError = error;
  }
  throwIfAnyRankFailed(group, localError, `Loading checkpoint ${path}`);
  for (const [shard, values] of staged!.parameters) shard.data.set(values);
  staged!.commitOptimizer?.();
  staged!.commitReplicated?.();
  return {
    path: directory,
    step: metadata!.step,
    extra: metadata!.extra,
    savedWorldSize: metadata!.worldSize,
    bytesRead: staged!.bytesRead,
    buffers: staged!.replicated.buffers,
    documents: staged!.replicated.documents,
  };
}

function stage(
  directory: string,
  metadata: CheckpointMetadata,
  shards: readonly FlatShard[],
  optimizer: OptimizerReader | undefined,
  group: { rank: number; size: number },
): Staged {
  const matched = matchParameters(directory, metadata, shards);
  const reads: PlannedRead[] = [];
  const parameters = new Map<FlatShard, Float32Array>();
  for (const shard of shards) {
    const target = new Float32Array(shard.data.length);
    parameters.set(shard, target);
    reads.push(...planBufferReads(directory, metadata, shard, 'parameters', target, matched));
  }
  const buffers = new Map<FlatShard, Map<string, Float32Array>>();
  let saved: SavedOptimizer | undefined;
  if (optimizer !== undefined) {
    saved = checkOptimizer(directory, metadata, optimizer);
    for (const shard of shards) {
      const shardBuffers = new Map<string, Float32Array>();
      const names = new Set(
        shard.layout.parameters.flatMap(
          (parameter) => saved!.parameters[matched.get(parameter.names[0]!)!.name]?.buffers ?? [],
        ),
      );
      for (const name of names) {
        const target = new Float32Array(shard.data.length);
        shardBuffers.set(name, target);
        const hasBuffer = (location: SavedLocation) =>
          saved!.parameters[location.name]?.buffers.includes(name) ?? false;
        reads.push(...planBufferReads(directory, metadata, shard, name, target, matched, hasBuffer));
      }
      buffers.set(shard, shardBuffers);
    }
  }
  let bytesRead = executeReads(directory, reads);
  bytesRead += verifyOwnedFiles(directory, metadata, reads, group.rank, group.size);
  // Every rank needs all of it: each reads the whole (small) file and checks its digest.
  const replicated = readReplicatedState(directory, metadata.replicated);
  bytesRead += metadata.replicated?.bytes ?? 0;
  const commitOptimizer =
    optimizer === undefined || saved === undefined ? null : optimizer.stage({ saved, buffers, matched });
  return { parameters, commitOptimizer, bytesRead, replicated, commitReplicated: null };
}

function checkOptimizer(
  directory: string,
  metadata: CheckpointMetadata,
  optimizer: OptimizerReader,
): SavedOptimizer {
  const saved = metadata.optimizer;
  const current = optimizer.groups;
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
