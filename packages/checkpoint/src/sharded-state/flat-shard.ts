import { type FlatParamLayout, type ShardIntersection, shardIntersections } from '@fsdp-ts/flat-param';

/**
 * [Note: sharded model state]
 * Checkpoints and sharded state dicts share one description of a model's sharded state, which
 * says nothing of FSDP: named flat parameters, each with its layout (names, shapes, offsets,
 * world size) and this rank's slice of it. FSDP describes itself this way (`modelShards`); the
 * checkpoint writer and reader (`writeCheckpoint`, `readCheckpoint`) and the sharded state dict
 * take only this description, so anything that holds flat-param layouts (@fsdp-ts/layers, for
 * one) could write and read the same files. Loading maps saved to current slices by parameter
 * name and row-major element index (`matchSavedParameters`, `savedRanges`), which does not
 * depend on world size, alignment or how parameters were grouped.
 */
export interface FlatShard {
  /** Name of the group the flat parameter belongs to (FSDP: the unit's module path, '' for the root). */
  readonly unit: string;
  /** Position of the flat parameter in its group. */
  readonly index: number;
  /** The flat parameter's layout (plain JSON; `FlatParamHandle.metadata()`). */
  readonly layout: FlatParamLayout;
  /** The rank (in `layout.worldSize`) whose slice `data` is. */
  readonly rank: number;
  /** Each layout parameter's part of the slice (`shardIntersections(layout, rank)`). */
  readonly intersections: readonly ShardIntersection[];
  /** This rank's slice: flat elements [rank × shardNumel, (rank + 1) × shardNumel) (live memory). */
  readonly data: Float32Array;
  /** Whether this rank writes the slice (replicas other than the first do not). */
  readonly writes: boolean;
}

/** A model's sharded state on one rank, as checkpoints and sharded state dicts see it. */
export interface ShardedModelState {
  /** Every flat parameter, groups in order, each group's flat parameters in order. */
  readonly shards: readonly FlatShard[];
  /** The number of ranks the flat parameters are sharded over (their layouts' world size). */
  readonly shardWorldSize: number;
  /** Recorded with the state (FSDP: the sharding preset's name). */
  readonly shardingStrategy: string;
}

/** A FlatShard from its layout, rank and slice (the intersections follow from them). */
export function flatShard(fields: Omit<FlatShard, 'intersections'>): FlatShard {
  return { ...fields, intersections: shardIntersections(fields.layout, fields.rank) };
}
