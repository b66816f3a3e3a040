import type { FlatParamMetadata } from '@fsdp-ts/flat-param';
import type { OptimizerStateDict } from '@fsdp-ts/optim';
import type { Parameter, TensorView } from '@fsdp-ts/tensor';
import { CheckpointError } from '../errors';

// State dicts of flat layouts, as plain objects (no communication, no model): a parameter's
// elements as pieces saved by ranks of any world size, the sharded state dict of a model's flat
// parameters, and optimizer state keyed by original names. @fsdp-ts/fsdp's fullStateDict,
// shardedStateDict, fullOptimStateDict and shardedOptimStateDict make and load them.

/** Elements [offset, offset + values.length) of a row-major parameter (or of one of its state buffers). */
export interface Piece {
  readonly offset: number;
  readonly values: Float32Array;
}

/**
 * Fills `target` with elements [start, start + target.length) of a parameter from `pieces`
 * (saved by ranks of any world size; overlaps, as from replicas, hold equal values). Throws
 * CheckpointError('model-mismatch', code 'state-dict-mismatch') naming the parameter when some element is in no piece.
 */
export function assembleRange(
  name: string,
  pieces: readonly Piece[],
  start: number,
  target: Float32Array,
): void {
  const end = start + target.length;
  const covered: [number, number][] = [];
  for (const piece of pieces) {
    const from = Math.max(start, piece.offset);
    const to = Math.min(end, piece.offset + piece.values.length);
    if (to <= from) continue;
    target.set(piece.values.subarray(from - piece.offset, to - piece.offset), from - start);
    covered.push([from, to]);
  }
  covered.sort((a, b) => a[0] - b[0]);
  let reached = start;
  for (const [from, to] of covered) {
    if (from > reached) break;
    reached = Math.max(reached, to);
  }
  if (reached < end) {
    throw new CheckpointError(
      `${name}: elements [${reached}, ${end}) are in none of the given shards (this rank needs [${start}, ${end})).`,
      {
        reason: 'model-mismatch',
        parameters: [name],
        expected: { name, range: [start, end] },
        actual: pieces.map((piece) => [piece.offset, piece.offset + piece.values.length]),
        fix: 'pass the sharded state dicts of every rank that saved them (e.g. gathered from all ranks or read from every file of a checkpoint).',
      },
    );
  }
}

/** The `format` string of a sharded state dict. */
export const SHARDED_STATE_DICT_FORMAT = 'fsdp-ts/sharded-state@1';

/**
 * One flat parameter of one unit as saved by one rank: a FlatShard ([Note: sharded model state])
 * with its slice copied, what a checkpoint writes per rank as a segment.
 */
export interface ShardedHandleEntry {
  /** Dotted name of the unit's module ('' for the root unit). */
  readonly unit: string;
  /** The flat-parameter layout (names, shapes, offsets, world size, alignment; plain JSON). */
  readonly metadata: FlatParamMetadata;
  /** The rank in `metadata.worldSize` whose shard `shard` is. */
  readonly rank: number;
  /** A copy of that shard: flat elements [rank × shardNumel, (rank + 1) × shardNumel) of the layout. */
  readonly shard: Float32Array;
}

/** A sharded parameter as saved by one rank: its shape and the elements this rank held. */
export interface ShardedParameterEntry {
  readonly shape: number[];
  /** Row-major element ranges; values alias the handle's shard copy (no second copy). */
  readonly pieces: Piece[];
}

/**
 * One rank's sharded state dict (no communication to make). `parameters` is keyed by original
 * names; `handles` carries the flat layouts and raw shards for checkpoints; `unmanaged` holds
 * full copies of buffers and ignoredModules' parameters.
 */
export interface ShardedStateDict {
  readonly format: typeof SHARDED_STATE_DICT_FORMAT;
  /** This rank in the group parameters are sharded over, and that group's size. */
  readonly rank: number;
  readonly worldSize: number;
  readonly shardingStrategy: string;
  readonly handles: ShardedHandleEntry[];
  readonly parameters: Record<string, ShardedParameterEntry>;
  readonly unmanaged: Record<string, TensorView>;
}

/** The `format` string of an optimizer state dict keyed by parameter names. */
export const FSDP_OPTIM_STATE_DICT_FORMAT = 'fsdp-ts/fsdp-optim-state@1';

/** What these functions need of an optimizer (every @fsdp-ts/optim optimizer has it). */
export interface StatefulOptimizer {
  readonly kind: string;
  readonly parameters: Parameter[];
  readonly paramGroups: readonly { readonly params: readonly Parameter[] }[];
  /** The optimizer's state dict. */
  stateDict(): OptimizerStateDict;
  /** Loads a state dict returned by `stateDict`. */
  loadStateDict(stateDict: OptimizerStateDict): void;
}

/** Optimizer state of one parameter: the step and, per state buffer, element ranges. */
export interface FsdpOptimParameterState {
  readonly shape: number[];
  readonly step: number;
  /** Full dicts: one piece per buffer covering the parameter; sharded: this rank's range. */
  readonly buffers: Record<string, Piece[]>;
}

/**
 * Optimizer state keyed by original parameter names, independent of the world size and
 * strategy that saved it: `fullOptimStateDict` holds whole buffers, `shardedOptimStateDict`
 * this rank's ranges (load every rank's dict to reshard).
 */
export interface FsdpOptimStateDict {
  readonly format: typeof FSDP_OPTIM_STATE_DICT_FORMAT;
  /** 'full' or 'sharded'. */
  readonly kind: 'full' | 'sharded';
  /** The optimizer class that saved it (`AdamW`, ...). */
  readonly optimizer: string;
  /** Per param group: hyperparameters and the original names of its parameters. */
  readonly paramGroups: {
    hyperparameters: OptimizerStateDict['paramGroups'][number]['hyperparameters'];
    paramNames: string[];
  }[];
  readonly state: Record<string, FsdpOptimParameterState>;
}
