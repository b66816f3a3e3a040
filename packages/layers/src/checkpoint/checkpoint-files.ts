import { join } from 'node:path';
import type { SavedParamGroup } from '@fsdp-ts/optim';

export const CHECKPOINT_FORMAT = 'fsdp-ts/layers-checkpoint@2';

/**
 * [Note: layers checkpoint layout]
 * A directory holding:
 * - `model/model.json` + `model/weights.bin`: the whole model in the tfjs format (rank 0 writes it;
 *   every rank holds the full weights while the trainer is idle). It loads with
 *   tf.loadLayersModel alone.
 * - `optimizer-rank-<r>.json` + `.bin`: rank r's optimizer state, the part of each parameter its
 *   optimizer steps (`offsetInParam`, `numel` elements of each buffer, float32 little-endian),
 *   whatever the strategy: a shard under the sharded strategies, all of it under 'replicate'.
 * - `checkpoint.json` (rank 0, written last): format, world size, strategy, optimizer, param
 *   groups, each parameter's name and numel, the SHA-256 of every other file, and its own SHA-256
 *   (of the JSON with `digest` empty), all checked before anything is used.
 * A load at any world size or strategy reassembles each parameter's state from the pieces and
 * keeps the part its new optimizer steps.
 *
 * [Note: layers checkpoint commit]
 * Every file is written into `<dir>.tmp-<nonce>` (a name rank 0 draws and broadcasts), fsynced;
 * the ranks agree that every write succeeded (otherwise rank 0 removes the temporary directory
 * and every rank throws, naming the rank that failed), rank 0 writes checkpoint.json, then
 * renames: an existing `<dir>` to `<dir>.previous`, the temporary one to `<dir>`, and removes
 * `<dir>.previous`. A crash leaves `<dir>` whole (old or new), or, between the two renames, only
 * `<dir>.previous`, which loadCheckpoint uses when `<dir>` is missing. Leftover `.tmp-*` siblings
 * are removed by the next save.
 */
export interface CheckpointIndex {
  format: typeof CHECKPOINT_FORMAT;
  worldSize: number;
  strategy: string;
  optimizer: string;
  paramGroups: SavedParamGroup[];
  parameters: { name: string; numel: number; shape: number[] }[];
  /** Path relative to the checkpoint directory → SHA-256 (hex) of its bytes. */
  files: Record<string, string>;
  /** SHA-256 of this JSON written with `digest: ''`. */
  digest: string;
}

export interface RankStateEntry {
  position: number;
  step: number;
  offsetInParam: number;
  numel: number;
  /** Buffer name → byte offset in the rank's .bin file. */
  buffers: Record<string, number>;
}

export interface RankStateIndex {
  rank: number;
  entries: RankStateEntry[];
}

export const checkpointNames = {
  index: 'checkpoint.json',
  model: 'model',
  modelJson: 'model/model.json',
  modelWeights: 'model/weights.bin',
  rankIndex: (rank: number) => `optimizer-rank-${rank}.json`,
  rankData: (rank: number) => `optimizer-rank-${rank}.bin`,
};

export const checkpointPaths = {
  index: (directory: string) => join(directory, checkpointNames.index),
  model: (directory: string) => join(directory, checkpointNames.model),
  rankIndex: (directory: string, rank: number) => join(directory, checkpointNames.rankIndex(rank)),
  rankData: (directory: string, rank: number) => join(directory, checkpointNames.rankData(rank)),
};

/** Where a crash between the commit's two renames leaves the previous checkpoint. */
export function previousDirectory(directory: string): string {
  return `${directory}.previous`;
}
