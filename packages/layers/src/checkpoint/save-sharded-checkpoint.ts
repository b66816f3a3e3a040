import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import type { BaseOptions, Optimizer } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import type { LayersModel } from '@tensorflow/tfjs-layers';
import { LayersError } from '../errors';
import { resolveSaveTarget } from '../internal/file-save-handler';
import {
  CHECKPOINT_FORMAT,
  type CheckpointIndex,
  checkpointNames,
  checkpointPaths,
  previousDirectory,
  type RankStateIndex,
} from './checkpoint-files';
import { fsyncPath, sha256, sha256File, writeFileDurably } from './durable-files';

export interface CheckpointSource {
  model: LayersModel;
  group: ProcessGroup;
  strategy: string;
  optimizer: Optimizer<BaseOptions>;
  parameters: readonly Parameter[];
  /** Per parameter (trainer order): the part this rank's optimizer steps. */
  pieces: readonly { offsetInParam: number; length: number }[];
}

/** Every rank learns whether every rank succeeded; the first failing rank's error is rethrown everywhere. */
function agreeOnSuccess(group: ProcessGroup, error: unknown, what: string): void {
  const failed = allocateShared(Int32Array, group.size);
  const mine = new Int32Array([error === null ? 0 : 1]);
  if (group.size > 1) group.allGather(failed, mine).wait();
  else failed[0] = mine[0]!;
  const rank = failed.indexOf(1);
  if (rank < 0) return;
  const message = error instanceof Error ? `: ${error.message}` : '';
  throw new LayersError(
    `Saving the checkpoint failed on rank ${rank} while ${what}${rank === group.rank ? message : ''}.`,
    {
      code: 'checkpoint-failed',
      rank,
      expected: 'every rank writes its files',
      actual: rank === group.rank ? String(error) : `rank ${rank} failed (seen on rank ${group.rank})`,
      fix: `look at rank ${rank}'s error (disk space, permissions of the checkpoint directory's parent); the previous checkpoint is unchanged.`,
      cause: error,
    },
  );
}

/** A name for the temporary directory, the same on every rank (rank 0 draws it). */
function agreedNonce(group: ProcessGroup): number {
  const nonce = allocateShared(Int32Array, 1);
  nonce[0] = Math.floor(Math.random() * 2 ** 31);
  if (group.size > 1) group.broadcast(nonce, { root: 0 }).wait();
  return nonce[0]!;
}

function removeStaleTemporaries(directory: string): void {
  const parent = dirname(directory);
  const prefix = `${basename(directory)}.tmp-`;
  for (const name of readdirSync(parent)) {
    if (name.startsWith(prefix)) rmSync(join(parent, name), { recursive: true, force: true });
  }
}

/** Writes this rank's optimizer state files into `temporary`. */
function writeRankFiles(temporary: string, source: CheckpointSource): void {
  const { group, optimizer } = source;
  const stateDict = optimizer.stateDict();
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  const index: RankStateIndex = { rank: group.rank, entries: [] };
  for (const [position, entry] of Object.entries(stateDict.state)) {
    const piece = source.pieces[Number(position)]!;
    const buffers: Record<string, number> = {};
    for (const [name, buffer] of Object.entries(entry.buffers)) {
      buffers[name] = bytes;
      chunks.push(new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength));
      bytes += buffer.byteLength;
    }
    index.entries.push({
      position: Number(position),
      step: entry.step,
      offsetInParam: piece.offsetInParam,
      numel: entry.numel,
      buffers,
    });
  }
  writeFileDurably(checkpointPaths.rankData(temporary, group.rank), Buffer.concat(chunks));
  writeFileDurably(checkpointPaths.rankIndex(temporary, group.rank), JSON.stringify(index));
}

/** Rank 0: the index with every file's digest and its own, written last. */
function writeIndex(temporary: string, source: CheckpointSource): void {
  const stateDict = source.optimizer.stateDict();
  const names = [checkpointNames.modelJson, checkpointNames.modelWeights];
  for (let rank = 0; rank < source.group.size; rank++)
    names.push(checkpointNames.rankIndex(rank), checkpointNames.rankData(rank));
  const index: CheckpointIndex = {
    format: CHECKPOINT_FORMAT,
    worldSize: source.group.size,
    strategy: source.strategy,
    optimizer: stateDict.optimizer,
    paramGroups: stateDict.paramGroups,
    parameters: source.parameters.map((parameter) => ({
      name: parameter.name,
      numel: parameter.numel,
      shape: [...parameter.shape],
    })),
    files: Object.fromEntries(names.map((name) => [name, sha256File(join(temporary, name))])),
    digest: '',
  };
  index.digest = sha256(JSON.stringify(index));
  writeFileDurably(checkpointPaths.index(temporary), JSON.stringify(index));
  fsyncPath(temporary);
}

/** Rank 0: the temporary directory becomes `directory` (see [Note: layers checkpoint commit]). */
function commit(temporary: string, directory: string): void {
  const previous = previousDirectory(directory);
  rmSync(previous, { recursive: true, force: true });
  if (existsSync(directory)) renameSync(directory, previous);
  renameSync(temporary, directory);
  fsyncPath(dirname(directory));
  rmSync(previous, { recursive: true, force: true });
}

/** Writes a checkpoint (see [Note: layers checkpoint layout]); every rank must call it. */
export async function saveShardedCheckpoint(directory: string, source: CheckpointSource): Promise<void> {
  const { group } = source;
  const target = resolve(directory);
  const temporary = `${target}.tmp-${agreedNonce(group)}`;
  let error: unknown = null;
  if (group.rank === 0) {
    try {
      mkdirSync(dirname(target), { recursive: true });
      removeStaleTemporaries(target);
      mkdirSync(temporary);
      await source.model.save(resolveSaveTarget(`file://${checkpointPaths.model(temporary)}`));
      for (const name of [checkpointNames.modelJson, checkpointNames.modelWeights, checkpointNames.model])
        fsyncPath(join(temporary, name));
    } catch (caught) {
      error = caught;
    }
  }
  try {
    agreeOnSuccess(group, error, 'creating the directory and writing the model');
    try {
      writeRankFiles(temporary, source);
    } catch (caught) {
      error = caught;
    }
    agreeOnSuccess(group, error, 'writing its optimizer state');
    if (group.rank === 0) {
      try {
        writeIndex(temporary, source);
        commit(temporary, target);
      } catch (caught) {
        error = caught;
      }
    }
    agreeOnSuccess(group, error, 'committing the checkpoint');
  } catch (failure) {
    if (group.rank === 0) rmSync(temporary, { recursive: true, force: true });
    throw failure;
  }
}
