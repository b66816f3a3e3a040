import type { FlatParamMetadata } from '@fsdp-ts/flat-param';
import type { HyperparameterValue } from '@fsdp-ts/optim';
import type { DType } from '@fsdp-ts/tensor';

/**
 * Version of the on-disk format (metadata.json `formatVersion`); bumped on any incompatible change.
 * 2: metadata.json carries its own digest (see [Note: metadata digest]).
 * 3: the `replicated` section: buffers and documents, saved once (see [Note: replicated state]).
 * Versions 1 and 2 still load (with no buffers and no documents).
 */
export const CHECKPOINT_FORMAT_VERSION = 3;
export const CHECKPOINT_FORMAT = 'fsdp-ts/checkpoint';
export const METADATA_FILE = 'metadata.json';
export const LATEST_FILE = 'latest';
/** Rank 0's file of buffers and documents (format version 3; see [Note: replicated state]). */
export const REPLICATED_STATE_FILE = 'replicated-state.bin';
/** Bytes covered by one SHA-256 in `blockDigests` (a reader verifies the blocks it touches). */
export const DEFAULT_BLOCK_BYTES = 1 << 20;

/**
 * [Note: checkpoint layout]
 * dir/
 *   latest                        text: the name of the newest complete step directory
 *   step-00000010/
 *     metadata.json               CheckpointMetadata (written last, by rank 0)
 *     shard-00000-of-00002.bin    rank 0's bytes: raw little-endian float32 segments
 *     shard-00000-of-00002.json   rank 0's index (RankIndex) of those segments
 *     shard-00001-of-00002.bin / .json
 *     replicated-state.bin        rank 0's buffers and documents, when any (see [Note: replicated state])
 * Each segment is one handle's flat shard ([shardNumel] elements of the saved layout, padding
 * included) of the parameters, or of one optimizer buffer (e.g. `expAvg`) laid out like the
 * parameters, zeros where a parameter has no state. Element e of the segment of rank r is flat
 * element r × shardNumel + e of the unit, so any world size can find its elements through the
 * layout (locateParameterRange), whatever the world size it was saved at.
 * A step directory is built under `.tmp-step-…` and renamed into place only when every file
 * (and the directory) is fsynced: a directory named `step-…` is always complete.
 */
export interface Segment {
  unit: string;
  handle: number;
  /** 'parameters' or the optimizer buffer name. */
  buffer: string;
  /** Bytes from the start of the file. */
  byteOffset: number;
  numel: number;
}

/** Optimizer state of one parameter on the saving rank (keyed by its first name). */
export interface SavedParameterState {
  step: number;
  buffers: string[];
}

/** What each rank writes next to its data file. */
export interface RankIndex {
  rank: number;
  file: string;
  bytes: number;
  sha256: string;
  blockBytes: number;
  blockDigests: string[];
  segments: Segment[];
  optimizerState: Record<string, SavedParameterState>;
}

export interface SavedHandle {
  unit: string;
  handle: number;
  layout: FlatParamMetadata;
}

/** The optimizer section of a checkpoint: its kind, param groups and per-parameter state. */
export interface SavedOptimizer {
  kind: string;
  groups: { hyperparameters: Record<string, HyperparameterValue>; paramNames: string[] }[];
  /** Per parameter (first name): its step count and buffer names. */
  parameters: Record<string, SavedParameterState>;
}

/** One rank's data file in a checkpoint and its index. */
export interface DataFileEntry {
  rank: number;
  file: string;
  index: string;
  bytes: number;
  sha256: string;
  indexSha256: string;
  blockBytes: number;
  blockDigests: string[];
  segments: Segment[];
}

/** Where the non-parameter state is (see [Note: replicated state]). */
export interface SavedReplicatedState {
  file: string;
  bytes: number;
  sha256: string;
  buffers: { name: string; dtype: DType; shape: number[]; byteOffset: number; byteLength: number }[];
  documents: { name: string; kind: 'json' | 'bytes'; byteOffset: number; byteLength: number }[];
}

/** A checkpoint's metadata: format and version, step, world sizes, strategy, parameters, files, optimizer. */
export interface CheckpointMetadata {
  format: typeof CHECKPOINT_FORMAT;
  formatVersion: typeof CHECKPOINT_FORMAT_VERSION | 2 | 1;
  step: number;
  worldSize: number;
  /** World size of the saved layouts (1 for no-shard). */
  shardWorldSize: number;
  shardingStrategy: string;
  createdAt: string;
  handles: SavedHandle[];
  /** Every parameter by its names: shape and dtype. */
  parameters: { names: string[]; shape: number[]; dtype: string }[];
  files: DataFileEntry[];
  optimizer: SavedOptimizer | null;
  extra: unknown;
  /** Buffers and documents; null when none were saved; absent before format version 3. */
  replicated?: SavedReplicatedState | null;
}

export function dataFileName(rank: number, worldSize: number): string {
  return `shard-${pad(rank, 5)}-of-${pad(worldSize, 5)}.bin`;
}

export function indexFileName(rank: number, worldSize: number): string {
  return `shard-${pad(rank, 5)}-of-${pad(worldSize, 5)}.json`;
}

export function stepDirectoryName(step: number): string {
  return `step-${pad(step, 8)}`;
}

export function pad(value: number, width: number): string {
  return String(value).padStart(width, '0');
}
