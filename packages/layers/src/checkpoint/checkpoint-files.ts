import { join } from 'node:path';
import type { SavedParamGroup } from '@fsdp-ts/optim';

export const CHECKPOINT_FORMAT = 'fsdp-ts/layers-checkpoint@1';

/**
 * [Note: layers checkpoint layout]
 * A directory holding:
 * - `model/model.json` + `model/weights.bin`: the whole model in the tfjs format (rank 0 writes it;
 *   every rank holds the full weights after each step). It loads with tf.loadLayersModel alone.
 * - `optimizer-rank-<r>.json` + `.bin`: rank r's optimizer state, the part of each parameter its
 *   optimizer steps (`offsetInParam`, `numel` elements of each buffer, float32 little-endian),
 *   whatever the strategy: a shard under 'shard-optimizer'/'shard-gradients', all of it under
 *   'replicate'.
 * - `checkpoint.json` (rank 0, written last): format, world size, strategy, optimizer, param
 *   groups, and each parameter's name and numel.
 * A load at any world size or strategy reassembles each parameter's state from the pieces and
 * keeps the part its new optimizer steps.
 */
export interface CheckpointIndex {
  format: typeof CHECKPOINT_FORMAT;
  worldSize: number;
  strategy: string;
  optimizer: string;
  paramGroups: SavedParamGroup[];
  parameters: { name: string; numel: number; shape: number[] }[];
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

export const checkpointPaths = {
  index: (directory: string) => join(directory, 'checkpoint.json'),
  model: (directory: string) => join(directory, 'model'),
  rankIndex: (directory: string, rank: number) => join(directory, `optimizer-rank-${rank}.json`),
  rankData: (directory: string, rank: number) => join(directory, `optimizer-rank-${rank}.bin`),
};
