import { createHash, randomInt } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { endianness } from 'node:os';
import { join } from 'node:path';
import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { OptionKeys } from '@fsdp-ts/errors';
import { CheckpointError, checkCheckpointOptionKeys } from '../errors';
import { commitStepDirectory, pruneCheckpoints, writeLatestPointer } from '../format/checkpoint-directory';
import {
  CHECKPOINT_FORMAT,
  CHECKPOINT_FORMAT_VERSION,
  type CheckpointMetadata,
  type DataFileEntry,
  DEFAULT_BLOCK_BYTES,
  dataFileName,
  indexFileName,
  LATEST_FILE,
  METADATA_FILE,
  type RankIndex,
  REPLICATED_STATE_FILE,
  type SavedOptimizer,
  type SavedReplicatedState,
  stepDirectoryName,
} from '../format/checkpoint-format';
import { fsyncDirectory, writeFileDurably } from '../format/durable-files';
import { serializeMetadata } from '../format/metadata-digest';
import {
  type CheckpointBuffer,
  type CheckpointDocument,
  checkReplicatedInput,
  writeReplicatedState,
} from '../format/replicated-state';
import { broadcastOutcome, throwIfAnyRankFailed } from '../group-agreement';
import type { ShardedModelState } from '../sharded-state/flat-shard';
import type { ShardedOptimizerState, WrittenPiece } from '../sharded-state/optimizer-state';
import { RankFileWriter } from './rank-file-writer';

/** What writeCheckpoint needs: the group, the neutral description of the state, and the options. */
export interface WriteCheckpointOptions {
  /** Every rank of it calls writeCheckpoint; rank 0 commits. */
  group: ProcessGroup;
  /** This rank's flat shards (see [Note: sharded model state]). */
  model: ShardedModelState;
  /**
   * The optimizer state to save with the shards, made inside the save's failure agreement (so a
   * rank whose optimizer does not fit fails the save on every rank instead of blocking them).
   */
  optimizer?: () => ShardedOptimizerState;
  /** The training step the checkpoint is taken after (names the directory: step-00000005). */
  step: number;
  /** JSON data saved with the checkpoint and returned by loadCheckpoint: data order, RNG state, … */
  extra?: unknown;
  /**
   * Named tensors that are not parameters (module buffers, batch-norm moving statistics), the same
   * on every rank: rank 0's are saved, once, and every rank gets them back from readCheckpoint
   * (see [Note: replicated state]).
   */
  buffers?: Readonly<Record<string, CheckpointBuffer>>;
  /** Named small documents, JSON values or bytes (a model topology, the epoch): rank 0's are saved. */
  documents?: Readonly<Record<string, CheckpointDocument>>;
  /** Keep only the newest `keep` checkpoints under `root`. Default: keep all. */
  keep?: number;
  /** Bytes per verified block (advanced). Default 1 MiB. */
  blockBytes?: number;
}

/** What writing a checkpoint returns: its step directory, the step, and the bytes this rank wrote. */
export interface SavedCheckpoint {
  path: string;
  step: number;
  /** Bytes this rank wrote. */
  bytes: number;
  /**
   * What this rank wrote of streamed values ([Note: streamed values]): their bytes, and the
   * longest run any of them handed the writer at once (what the producer staged; 0 if none).
   */
  streamed: { bytes: number; largestRunBytes: number };
}

/**
 * Writes a checkpoint of a sharded state under `root/step-NNNNNNNN/` (collective: every rank calls
 * it with the same step). Each rank writes its own shard file in parallel; rank 0 then writes
 * metadata.json and renames the fsynced temporary directory into place, updates `latest` and
 * prunes. A crash at any moment leaves the previous checkpoints intact. See [Note: checkpoint
 * layout]. Knows nothing of FSDP: saveCheckpoint describes the model and calls it.
 */
export function writeCheckpoint(root: string, options: WriteCheckpointOptions): SavedCheckpoint {
  const { group, model, optimizer, step } = options;
  // Checked on every rank and agreed before anything is created: a rank with bad options or an
  // `extra` that is not JSON fails the save everywhere instead of leaving the others waiting.
  let extra: unknown = null;
  let inputError: unknown;
  try {
    checkOptions(options);
    extra = extraAsJson(options.extra);
  } catch (error) {
    inputError = error;
  }
  throwIfAnyRankFailed(group, inputError, `Checking the options of checkpoint step ${step}`);
  const blockBytes = options.blockBytes ?? DEFAULT_BLOCK_BYTES;
  let nonce = 0;
  let prepareError: unknown;
  if (group.rank === 0) {
    try {
      nonce = randomInt(1, 2 ** 31 - 1);
      mkdirSync(root, { recursive: true });
      removeLeftovers(root);
      mkdirSync(temporaryDirectory(root, step, nonce));
    } catch (error) {
      prepareError = ioError(`Could not create the checkpoint directory under ${root}`, root, error);
    }
  }
  nonce = broadcastOutcome(group, nonce, prepareError, 'Preparing the checkpoint directory');
  const temporary = temporaryDirectory(root, step, nonce);

  let bytes = 0;
  let streamed = { bytes: 0, largestRunBytes: 0 };
  let writeError: unknown;
  let optimizerState: ShardedOptimizerState | undefined;
  let replicated: SavedReplicatedState | null = null;
  const written: string[] = [];
  try {
    // Checked on every rank inside the agreement: a rank with bad input fails the save everywhere.
    checkReplicatedInput(options);
    optimizerState = optimizer?.();
    ({ bytes, streamed } = writeRankFiles(temporary, model, optimizerState, blockBytes, written));
    if (group.rank === 0) {
      written.push(join(temporary, REPLICATED_STATE_FILE));
      replicated = writeReplicatedState(temporary, options);
      bytes += replicated?.bytes ?? 0;
    }
  } catch (error) {
    writeError =
      error instanceof CheckpointError ? error : ioError('Writing this rank’s shard', temporary, error);
  }
  try {
    throwIfAnyRankFailed(group, writeError, `Saving checkpoint step ${step}`);
  } catch (error) {
    removeFailedSave(group, temporary, written);
    throw error;
  }

  let path = join(root, stepDirectoryName(step));
  let commitError: unknown;
  if (group.rank === 0) {
    let file = join(temporary, METADATA_FILE);
    try {
      const metadata = buildMetadata(group.size, model, optimizerState, step, extra, temporary, replicated);
      writeFileDurably(file, serializeMetadata(metadata));
      fsyncDirectory(temporary);
      file = join(root, stepDirectoryName(step));
      path = commitStepDirectory(root, temporary, step, nonce);
      file = join(root, LATEST_FILE);
      writeLatestPointer(root, step);
      file = root;
      pruneCheckpoints(root, options.keep, path);
    } catch (error) {
      commitError = ioError(`Committing checkpoint step ${step} (writing ${file})`, file, error);
      rmSync(temporary, { recursive: true, force: true });
    }
  }
  broadcastOutcome(group, 0, commitError, `Committing checkpoint step ${step}`);
  return { path, step, bytes, streamed };
}

function temporaryDirectory(root: string, step: number, nonce: number): string {
  return join(root, `.tmp-${stepDirectoryName(step)}-${nonce}`);
}

/**
 * [Note: a failed save leaves nothing behind]
 * After any rank failed to write, every rank removes the files it wrote (so a full disk gets its
 * space back at once, even where the temporary directory is not shared); after a barrier rank 0
 * removes the directory itself. The next save also removes `.tmp-step-*` leftovers of crashed
 * saves before it writes anything.
 */
function removeFailedSave(group: ProcessGroup, temporary: string, written: readonly string[]): void {
  for (const file of written) {
    try {
      rmSync(file, { force: true });
    } catch {
      // Best effort: rank 0 removes the whole directory below.
    }
  }
  group.barrier().wait();
  if (group.rank === 0) rmSync(temporary, { recursive: true, force: true });
}

/** Removes temporary directories of saves that crashed (only rank 0 calls this, before a save). */
function removeLeftovers(root: string): void {
  for (const name of readdirSync(root)) {
    if (name.startsWith('.tmp-step-')) rmSync(join(root, name), { recursive: true, force: true });
  }
}

/** Writes this rank's data and index files (none on ranks that hold no shard, e.g. no-shard rank > 0). */
function writeRankFiles(
  directory: string,
  model: ShardedModelState,
  state: ShardedOptimizerState | undefined,
  blockBytes: number,
  written: string[],
): { bytes: number; streamed: SavedCheckpoint['streamed'] } {
  const { shards, shardWorldSize } = model;
  const writing = shards.filter((entry) => entry.writes);
  if (writing.length === 0 && shards.length > 0)
    return { bytes: 0, streamed: { bytes: 0, largestRunBytes: 0 } };
  const rank = shards[0]?.rank ?? 0;
  const file = dataFileName(rank, shardWorldSize);
  let writer: RankFileWriter;
  written.push(join(directory, file));
  try {
    writer = new RankFileWriter(join(directory, file), blockBytes);
  } catch (error) {
    throw ioError(`Creating ${join(directory, file)}`, join(directory, file), error);
  }
  let finished: { bytes: number; sha256: string };
  try {
    for (const entry of writing) {
      writer.append(entry.unit, entry.index, 'parameters', entry.data);
      const buffers = state?.buffers.get(entry) ?? new Map<string, WrittenPiece[]>();
      for (const name of [...buffers.keys()].sort()) {
        writer.appendPieces(entry.unit, entry.index, name, entry.data.length, buffers.get(name)!);
      }
    }
    finished = writer.finish();
  } catch (error) {
    writer.abandon();
    throw error instanceof CheckpointError ? error : ioError(`Writing ${writer.path}`, writer.path, error);
  }
  const index: RankIndex = {
    rank,
    file,
    bytes: finished.bytes,
    sha256: finished.sha256,
    blockBytes,
    blockDigests: writer.blockDigests,
    segments: writer.segments,
    optimizerState: state?.parameters ?? {},
  };
  const indexPath = join(directory, indexFileName(rank, shardWorldSize));
  written.push(indexPath);
  try {
    writeFileDurably(indexPath, JSON.stringify(index));
  } catch (error) {
    throw ioError(`Writing ${indexPath}`, indexPath, error);
  }
  return {
    bytes: finished.bytes,
    streamed: { bytes: writer.streamedBytes, largestRunBytes: writer.streamedRunBytesHighWater },
  };
}

function buildMetadata(
  worldSize: number,
  model: ShardedModelState,
  optimizer: ShardedOptimizerState | undefined,
  step: number,
  extra: unknown,
  directory: string,
  replicated: SavedReplicatedState | null,
): CheckpointMetadata {
  const { shards, shardWorldSize } = model;
  const files: DataFileEntry[] = [];
  const optimizerParameters: SavedOptimizer['parameters'] = {};
  for (let rank = 0; rank < shardWorldSize; rank++) {
    const indexFile = indexFileName(rank, shardWorldSize);
    const raw = readFileSync(join(directory, indexFile));
    const index = JSON.parse(raw.toString('utf8')) as RankIndex;
    const { optimizerState, ...entry } = index;
    Object.assign(optimizerParameters, optimizerState);
    files.push({ ...entry, index: indexFile, indexSha256: createHash('sha256').update(raw).digest('hex') });
  }
  return {
    format: CHECKPOINT_FORMAT,
    formatVersion: CHECKPOINT_FORMAT_VERSION,
    step,
    worldSize,
    shardWorldSize,
    shardingStrategy: model.shardingStrategy,
    createdAt: new Date().toISOString(),
    handles: shards.map((entry) => ({
      unit: entry.unit,
      handle: entry.index,
      layout: JSON.parse(JSON.stringify(entry.layout)),
    })),
    parameters: shards.flatMap((entry) =>
      entry.layout.parameters.map((parameter) => ({
        names: [...parameter.names],
        shape: [...parameter.shape],
        dtype: entry.layout.dtype,
      })),
    ),
    files,
    optimizer:
      optimizer === undefined
        ? null
        : {
            kind: optimizer.kind,
            groups: [...optimizer.groups],
            parameters: optimizerParameters,
          },
    extra,
    replicated,
  };
}

/** The keys of WriteCheckpointOptions ([Note: option keys] in @fsdp-ts/errors). */
const writeCheckpointOptionKeys = {
  group: true,
  model: true,
  optimizer: true,
  step: true,
  extra: true,
  buffers: true,
  documents: true,
  keep: true,
  blockBytes: true,
} as const satisfies OptionKeys<WriteCheckpointOptions>;

function checkOptions(options: WriteCheckpointOptions): void {
  checkCheckpointOptionKeys('writeCheckpoint', options, writeCheckpointOptionKeys);
  if (endianness() !== 'LE') {
    throw new CheckpointError('Checkpoints are little-endian; this machine is big-endian.', {
      reason: 'io',
      expected: 'LE',
      actual: endianness(),
    });
  }
  if (!Number.isSafeInteger(options.step) || options.step < 0) {
    throw new CheckpointError(`saveCheckpoint needs a non-negative integer step; got ${options.step}.`, {
      reason: 'invalid-input',
      expected: 'an integer >= 0',
      actual: options.step,
      fix: 'pass the number of training steps taken so far.',
    });
  }
  if (options.keep !== undefined && (!Number.isSafeInteger(options.keep) || options.keep < 1)) {
    throw new CheckpointError(`keep must be a positive integer; got ${options.keep}.`, {
      reason: 'invalid-input',
      expected: 'an integer >= 1',
      actual: options.keep,
      fix: 'pass how many checkpoints to keep (at least 1), or leave keep out to keep them all.',
    });
  }
}

/**
 * `extra` as the plain JSON value metadata.json will hold (null when absent), or a CheckpointError
 * 'invalid-input' when JSON cannot hold it (a BigInt, a cycle, a throwing toJSON).
 */
export function extraAsJson(extra: unknown): unknown {
  if (extra === undefined) return null;
  let text: string | undefined;
  try {
    text = JSON.stringify(extra);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new CheckpointError(`The checkpoint's extra is not JSON: ${message}`, {
      reason: 'invalid-input',
      expected: 'a JSON value (objects, arrays, strings, finite numbers, booleans, null)',
      actual: message,
      fix: 'convert BigInts to strings or numbers and remove cycles before passing extra.',
      cause: error,
    });
  }
  if (text === undefined) {
    throw new CheckpointError(`The checkpoint's extra is a ${typeof extra}, which JSON cannot hold.`, {
      reason: 'invalid-input',
      expected: 'a JSON value (objects, arrays, strings, finite numbers, booleans, null)',
      actual: typeof extra,
      fix: 'pass a JSON value as extra, or leave extra out.',
    });
  }
  return JSON.parse(text);
}

function ioError(what: string, file: string, cause: unknown): CheckpointError {
  const message = cause instanceof Error ? cause.message : String(cause);
  return new CheckpointError(`${what} failed: ${message}`, {
    reason: 'io',
    file,
    cause,
    fix: 'check that the directory is on a file system every rank shares, writable, with free space.',
  });
}
