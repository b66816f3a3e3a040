import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { OptionKeys } from '@fsdp-ts/errors';
import { CheckpointError, checkCheckpointOptionKeys } from '../errors';
import type { CheckpointLog } from '../format/checkpoint-directory';
import type { CheckpointMetadata, SavedOptimizer } from '../format/checkpoint-format';
import { readCheckpointMetadata, resolveCheckpointDirectory } from '../format/checkpoint-metadata';
import { type ReplicatedState, readReplicatedState } from '../format/replicated-state';
import { throwIfAnyRankFailed } from '../group-agreement';
import type { FlatShard, ShardedModelState } from '../sharded-state/flat-shard';
import type { OptimizerGroupDescription, StatePiece } from '../sharded-state/optimizer-state';
import { matchParameters, planBufferReads, type SavedLocation } from './checkpoint-read-plan';
import { executeReads, type PlannedRead, retargetToPieces } from './verified-range-reader';
import { verifyOwnedFiles } from './verify-unread-blocks';

/** The optimizer state read for this rank's flat shards, before anything is loaded. */
export interface StagedOptimizerState {
  readonly saved: SavedOptimizer;
  /** Per flat shard, per state buffer: values laid out like the shard's slice (zeros where no state). */
  readonly buffers: ReadonlyMap<FlatShard, ReadonlyMap<string, Float32Array>>;
  /** Where each current parameter (by first name) is in the checkpoint. */
  readonly matched: ReadonlyMap<string, SavedLocation>;
}

/**
 * Where an optimizer's saved state is read to, without staging: for each flat shard and state
 * buffer, the arrays that will hold it as pieces of the shard (each piece one parameter's part,
 * `offset` elements into the shard), and what hands them to the optimizer.
 */
export interface OptimizerLoadTargets {
  readonly pieces: ReadonlyMap<FlatShard, ReadonlyMap<string, readonly StatePiece[]>>;
  /** The pieces are filled a batch at a time (state kept elsewhere); absent: all at once. */
  readonly batches?: LoadBatches;
  /** Called once every rank has verified its reads; the pieces are filled after it returns. */
  commit(): void;
  /** Called once the pieces are filled. */
  finish?(): void;
}

/**
 * [Note: loads in batches]
 * The load's side of [Note: streamed values]: state kept elsewhere (an offload store) is loaded
 * through one bounded buffer. Its pieces are views of that buffer and fall in `count` batches;
 * after the ranks agree, batch b is filled alone, in order: `begin(b)` (the producer readies the
 * buffer for b: reads what b keeps unchanged), the reads of the pieces in b, `end(b)` (the
 * producer writes the buffer where b lives). Every batch is begun and ended, even one with no
 * piece, so the producer sees all of its state go through. Pieces of different batches may share
 * memory; pieces of one batch do not.
 */
export interface LoadBatches {
  readonly count: number;
  /** The batch of a piece, by its `values` (an array of `pieces`). */
  batchOf(values: Float32Array): number;
  begin(batch: number): void;
  end(batch: number): void;
}

/**
 * The optimizer a checkpoint's state is read for, described without the optimizer: either
 * `prepare` (the state is read straight into the arrays it names, see [Note: loads verify,
 * agree, then read in place]) or `stage` (the state is read into staging copies first).
 */
export interface OptimizerReader {
  readonly kind: string;
  readonly groups: readonly OptimizerGroupDescription[];
  /**
   * Names the arrays the saved state goes to (may throw: it runs before the ranks agree). Used
   * when present; loadCheckpoint's reader has it.
   */
  prepare?(saved: SavedOptimizer, matched: ReadonlyMap<string, SavedLocation>): OptimizerLoadTargets;
  /**
   * Prepares the load from the staged state (may throw: it runs before the ranks agree) and
   * returns what applies it once every rank succeeded. Costs a staging copy of the state.
   */
  stage?(staged: StagedOptimizerState): () => void;
}

/** Options of readCheckpoint. */
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

/** What a load returns: the step directory, step, `extra`, the saved world size, the replicated state. */
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

interface Planned {
  /** Reads into the arrays that keep the values (the shards, the optimizer's state): done after the agreement. */
  inPlace: PlannedRead[];
  /** Reads into pieces filled a batch at a time ([Note: loads in batches]), after `inPlace`. */
  batched: { batches: LoadBatches; reads: PlannedRead[][] } | null;
  commitOptimizer: (() => void) | null;
  finishOptimizer: (() => void) | null;
  replicated: ReplicatedState;
  commitReplicated: (() => void) | null;
  bytesRead: number;
}

/** The keys of ReadCheckpointOptions ([Note: option keys] in @fsdp-ts/errors). */
const readCheckpointOptionKeys = {
  group: true,
  model: true,
  optimizer: true,
  replicated: true,
  log: true,
} as const satisfies OptionKeys<ReadCheckpointOptions>;

/**
 * Reads a checkpoint (a step directory, or a root holding `latest`) into flat shards at any world
 * size (collective). Each rank reads only the verified blocks holding its shards. Nothing changes
 * unless every rank read and checked everything it needs; otherwise every rank throws a
 * CheckpointError (the failing rank's names the file and the parameter). Knows nothing of FSDP:
 * loadCheckpoint describes the model and calls it.
 *
 * [Note: loads verify, agree, then read in place]
 * A load holds no copy of what it loads: the shards, and with `OptimizerReader.prepare` the
 * optimizer state, are read straight into the arrays that keep them, a bounded run of blocks at
 * a time (8 MiB), each block checked against its SHA-256 on the way. To keep "a damaged
 * checkpoint changes nothing", every rank first reads and verifies all it will read (and its
 * share of the blocks nobody reads, [Note: every byte is verified by some rank]) without keeping
 * it; only when every rank succeeded does it read again into place. The second read verifies
 * again; if a file changed in between, every rank throws, saying the load was partial. The price
 * is reading the rank's bytes twice (the second read mostly from the page cache) instead of
 * holding a copy of them: at 353 M parameters and W=4 a copy was 1 GiB per rank, half a 2 GiB cap.
 */
export function readCheckpoint(path: string, options: ReadCheckpointOptions): LoadedCheckpoint {
  const { group, optimizer } = options;
  let directory = path;
  let metadata: CheckpointMetadata | undefined;
  let planned: Planned | undefined;
  let localError: unknown;
  try {
    checkCheckpointOptionKeys('readCheckpoint', options, readCheckpointOptionKeys);
    directory = resolveCheckpointDirectory(path, options.log);
    metadata = readCheckpointMetadata(directory);
    const model = typeof options.model === 'function' ? options.model() : options.model;
    planned = planAndVerify(directory, metadata, model.shards, optimizer, group);
    planned.commitReplicated = options.replicated?.(planned.replicated) ?? null;
  } catch (error) {
    localError = error;
  }
  throwIfAnyRankFailed(group, localError, `Loading checkpoint ${path}`);
  let readError: unknown;
  try {
    planned!.commitOptimizer?.();
    planned!.bytesRead += executeReads(directory, planned!.inPlace, 'copy');
    const batched = planned!.batched;
    for (let batch = 0; batched !== null && batch < batched.batches.count; batch++) {
      batched.batches.begin(batch);
      planned!.bytesRead += executeReads(directory, batched.reads[batch]!, 'copy');
      batched.batches.end(batch);
    }
    planned!.finishOptimizer?.();
    planned!.commitReplicated?.();
  } catch (error) {
    readError =
      error instanceof CheckpointError
        ? new CheckpointError(
            `${error.message} It was intact when verified moments before: the checkpoint changed while it was loaded, and the model and optimizer now hold part of it.`,
            {
              reason: error.reason,
              ...(error.file === undefined ? {} : { file: error.file }),
              parameters: error.parameters,
              cause: error,
              fix: 'stop whatever writes to the checkpoint directory, then load a checkpoint again before training.',
            },
          )
        : error;
  }
  throwIfAnyRankFailed(group, readError, `Loading checkpoint ${path} (reading in place)`);
  return {
    path: directory,
    step: metadata!.step,
    extra: metadata!.extra,
    savedWorldSize: metadata!.worldSize,
    bytesRead: planned!.bytesRead,
    buffers: planned!.replicated.buffers,
    documents: planned!.replicated.documents,
  };
}

/** Plans every read, then reads and verifies them (keeping only what a staging reader needs). */
function planAndVerify(
  directory: string,
  metadata: CheckpointMetadata,
  shards: readonly FlatShard[],
  optimizer: OptimizerReader | undefined,
  group: { rank: number; size: number },
): Planned {
  const matched = matchParameters(directory, metadata, shards);
  const inPlace: PlannedRead[] = [];
  const staging: PlannedRead[] = [];
  for (const shard of shards) {
    inPlace.push(...planBufferReads(directory, metadata, shard, 'parameters', shard.data, matched));
  }
  let batched: Planned['batched'] = null;
  let commitOptimizer: (() => void) | null = null;
  let finishOptimizer: (() => void) | null = null;
  let stageOptimizer: (() => () => void) | null = null;
  if (optimizer !== undefined) {
    const saved = checkOptimizer(directory, metadata, optimizer);
    const bufferNames = (shard: FlatShard) =>
      new Set(
        shard.layout.parameters.flatMap(
          (parameter) => saved.parameters[matched.get(parameter.names[0]!)!.name]?.buffers ?? [],
        ),
      );
    const plan = (shard: FlatShard, name: string, target: Float32Array) => {
      const hasBuffer = (location: SavedLocation) =>
        saved.parameters[location.name]?.buffers.includes(name) ?? false;
      return planBufferReads(directory, metadata, shard, name, target, matched, hasBuffer);
    };
    if (optimizer.prepare !== undefined) {
      const targets = optimizer.prepare(saved, matched);
      const { batches } = targets;
      if (batches !== undefined)
        batched = { batches, reads: Array.from({ length: batches.count }, () => []) };
      for (const shard of shards) {
        for (const name of bufferNames(shard)) {
          // Planned against the shard's layout, then pointed at each parameter's own array.
          const pieces = targets.pieces.get(shard)?.get(name) ?? [];
          const reads = retargetToPieces(plan(shard, name, new Float32Array(0)), pieces, name);
          if (batched === null) inPlace.push(...reads);
          else {
            for (const read of reads) {
              if (read.byteLength > 0) batched.reads[batched.batches.batchOf(read.target)]!.push(read);
            }
          }
        }
      }
      commitOptimizer = () => targets.commit();
      if (targets.finish !== undefined) finishOptimizer = () => targets.finish!();
    } else if (optimizer.stage !== undefined) {
      const buffers = new Map<FlatShard, Map<string, Float32Array>>();
      for (const shard of shards) {
        const shardBuffers = new Map<string, Float32Array>();
        for (const name of bufferNames(shard)) {
          const target = new Float32Array(shard.data.length);
          shardBuffers.set(name, target);
          staging.push(...plan(shard, name, target));
        }
        buffers.set(shard, shardBuffers);
      }
      const stage = optimizer.stage;
      stageOptimizer = () => stage({ saved, buffers, matched });
    }
  }
  const batchedReads = batched?.reads.flat() ?? [];
  let bytesRead = executeReads(directory, [...inPlace, ...batchedReads], 'verify');
  bytesRead += executeReads(directory, staging, 'copy');
  bytesRead += verifyOwnedFiles(
    directory,
    metadata,
    [...inPlace, ...batchedReads, ...staging],
    group.rank,
    group.size,
  );
  // Every rank needs all of it: each reads the whole (small) file and checks its digest.
  const replicated = readReplicatedState(directory, metadata.replicated);
  bytesRead += metadata.replicated?.bytes ?? 0;
  if (stageOptimizer !== null) commitOptimizer = stageOptimizer();
  return {
    inPlace,
    batched,
    commitOptimizer,
    finishOptimizer,
    replicated,
    commitReplicated: null,
    bytesRead,
  };
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
