import type { FlatParamMetadata } from '@fsdp-ts/flat-param';
import { TensorView } from '@fsdp-ts/tensor';
import { FsdpError } from '../errors';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import { checkNames } from './check-names';
import { localPart, parameterEntries } from './named-parameters';
import { assembleRange, type Piece } from './pieces';

export const SHARDED_STATE_DICT_FORMAT = 'fsdp-ts/sharded-state@1';

/** One flat parameter of one unit as saved by one rank: what a checkpoint writes per rank. */
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

export function shardedStateDict(model: FullyShardedDataParallel): ShardedStateDict {
  model.expectIdle('shardedStateDict()');
  const handles: ShardedHandleEntry[] = [];
  const parameters: Record<string, ShardedParameterEntry> = {};
  const shardCopies = new Map<unknown, Float32Array>();
  for (const unit of model.units) {
    for (const handle of unit.handles) {
      const { shardNumel } = handle.layout;
      // no-shard handles have world size 1: their one "shard" is the unsharded buffer.
      const source = handle.localBuffer();
      const shard = (source.typedArray() as Float32Array).slice(0, shardNumel);
      shardCopies.set(handle, shard);
      handles.push({ unit: unit.name, metadata: handle.metadata(), rank: handle.rank, shard });
    }
  }
  const unmanaged: Record<string, TensorView> = {};
  for (const entry of parameterEntries(model)) {
    if (entry.location === undefined) {
      unmanaged[entry.name] = TensorView.zeros([...entry.shape]).copyFrom(entry.parameter.data);
      continue;
    }
    const { handle, index } = entry.location;
    const intersection = handle.intersections[index]!;
    const shard = shardCopies.get(handle)!;
    const values = shard.subarray(
      intersection.offsetInShard,
      intersection.offsetInShard + intersection.length,
    );
    parameters[entry.name] = {
      shape: [...entry.shape],
      pieces: [{ offset: intersection.offsetInParam, values }],
    };
  }
  for (const [name, view] of model.namedBuffers())
    unmanaged[name] = TensorView.zeros([...view.shape], view.dtype).copyFrom(view);
  return {
    format: SHARDED_STATE_DICT_FORMAT,
    rank: model.group.rank,
    worldSize: model.group.size,
    shardingStrategy: model.options.shardingStrategy,
    handles,
    parameters,
    unmanaged,
  };
}

/**
 * [Note: resharding]
 * Loads sharded state dicts saved by any number of ranks with any strategy: pass all of them
 * (one is enough when it holds everything, e.g. from world size 1 or no-shard). Each rank
 * needs only elements [offset, offset + length) of each parameter (its intersection with its
 * shard in the new layout) and copies them from whichever saved pieces overlap: the mapping is
 * by original name and row-major element index, which does not depend on world size, alignment
 * or unit boundaries. No communication.
 */
export function loadShardedStateDict(
  model: FullyShardedDataParallel,
  input: ShardedStateDict | readonly ShardedStateDict[],
): void {
  model.expectIdle('loadShardedStateDict()');
  const dicts: readonly ShardedStateDict[] = Array.isArray(input) ? input : [input as ShardedStateDict];
  if (dicts.length === 0 || dicts.some((dict) => dict?.format !== SHARDED_STATE_DICT_FORMAT)) {
    throw new FsdpError('loadShardedStateDict: not a list of sharded state dicts.', {
      code: 'state-dict-mismatch',
      expected: SHARDED_STATE_DICT_FORMAT,
      actual: dicts.map((dict) => dict?.format),
      fix: 'pass what shardedStateDict() returned on each rank (or an array of them).',
    });
  }
  const pieces = new Map<string, Piece[]>();
  const actual = new Map<string, readonly number[]>();
  for (const dict of dicts) {
    for (const [name, entry] of Object.entries(dict.parameters)) {
      actual.set(name, entry.shape);
      pieces.set(name, [...(pieces.get(name) ?? []), ...entry.pieces]);
    }
    for (const [name, view] of Object.entries(dict.unmanaged)) actual.set(name, view.shape);
  }
  const entries = parameterEntries(model);
  const expected = new Map<string, readonly number[]>();
  for (const entry of entries) expected.set(entry.name, entry.shape);
  for (const [name, view] of model.namedBuffers()) expected.set(name, view.shape);
  checkNames('loadShardedStateDict', expected, new Map(), actual);
  const unmanaged = dicts[0]!.unmanaged;
  const targets = entries.map((entry) => ({ entry, part: localPart(entry) }));
  // Assemble into copies first so a coverage error leaves the model unchanged.
  const assembled = targets.map(({ entry, part }) => {
    if (entry.location === undefined) return unmanaged[entry.name]!.toArray();
    const values = new Float32Array(part.values.length);
    assembleRange(entry.name, pieces.get(entry.name) ?? [], part.offset, values);
    return values;
  });
  targets.forEach(({ part }, index) => {
    part.values.set(assembled[index]!);
  });
  for (const [name, view] of model.namedBuffers()) view.copyFrom(unmanaged[name]!);
}
