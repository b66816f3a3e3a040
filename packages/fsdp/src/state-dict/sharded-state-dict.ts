import {
  type FlatShard,
  type Piece,
  SHARDED_STATE_DICT_FORMAT,
  type ShardedHandleEntry,
  type ShardedParameterEntry,
  type ShardedStateDict,
} from '@fsdp-ts/checkpoint';
import {
  assembleRange,
  matchSavedParameters,
  type SavedFlatParameter,
  savedRanges,
} from '@fsdp-ts/checkpoint/internal';
import { TensorView } from '@fsdp-ts/tensor';
import { modelShards } from '../checkpoint/model-shards';
import { FsdpError } from '../errors';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import { checkNames } from './check-names';
import { parameterEntries } from './named-parameters';

/** This rank's shards of every parameter, keyed by the original parameter names, without gathering. */
export function shardedStateDict(model: FullyShardedDataParallel): ShardedStateDict {
  model.expectIdle('shardedStateDict()');
  const state = modelShards(model);
  const handles: ShardedHandleEntry[] = [];
  const parameters: Record<string, ShardedParameterEntry> = {};
  const copies = new Map<FlatShard, Float32Array>();
  for (const shard of state.shards) {
    const copy = shard.data.slice();
    copies.set(shard, copy);
    handles.push({
      unit: shard.unit,
      metadata: JSON.parse(JSON.stringify(shard.layout)),
      rank: shard.rank,
      shard: copy,
    });
  }
  const shardOf = new Map<string, { shard: FlatShard; index: number }>();
  for (const shard of state.shards)
    shard.layout.parameters.forEach((parameter, index) => {
      for (const name of parameter.names) shardOf.set(name, { shard, index });
    });
  const unmanaged: Record<string, TensorView> = {};
  for (const entry of parameterEntries(model)) {
    const location = entry.location === undefined ? undefined : shardOf.get(entry.name);
    if (location === undefined) {
      unmanaged[entry.name] = TensorView.zeros([...entry.shape]).copyFrom(entry.parameter.data);
      continue;
    }
    const { shard, index } = location;
    const intersection = shard.intersections[index]!;
    const values = copies
      .get(shard)!
      .subarray(intersection.offsetInShard, intersection.offsetInShard + intersection.length);
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
    shardingStrategy: state.shardingStrategy,
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
  // The values come from the dicts' flat shards, as a checkpoint's come from its files: the
  // same name matching and range location ([Note: sharded model state]).
  const { saved, slices } = savedShards(dicts);
  const state = modelShards(model);
  const { matched, problems } = matchSavedParameters(saved, state.shards, 'the dicts');
  if (problems.length > 0) {
    throw new FsdpError(
      `loadShardedStateDict: the dicts' flat parameters do not fit the model: ${problems.join('; ')}.`,
      {
        code: 'state-dict-mismatch',
        actual: problems,
        fix: 'pass the sharded state dicts saved from this model (same names and shapes); nothing was loaded.',
      },
    );
  }
  // Assemble into copies first so a coverage error leaves the model unchanged.
  const assembled = state.shards.map((shard) => {
    const values = shard.data.slice();
    for (const { index, location, pieces } of savedRanges(shard, matched)) {
      const available: Piece[] = [];
      for (const piece of pieces) {
        const slice = slices.get(sliceKey(location.unit, location.handle, piece.rank));
        if (slice === undefined) continue;
        available.push({
          offset: piece.offsetInParam,
          values: slice.subarray(piece.offsetInShard, piece.offsetInShard + piece.length),
        });
      }
      const { offsetInShard, offsetInParam, length } = shard.intersections[index]!;
      assembleRange(
        location.name,
        available,
        offsetInParam,
        values.subarray(offsetInShard, offsetInShard + length),
      );
    }
    return values;
  });
  const ignored = entries.filter((entry) => entry.location === undefined);
  const ignoredValues = ignored.map((entry) => unmanaged[entry.name]!.toArray());
  state.shards.forEach((shard, index) => {
    shard.data.set(assembled[index]!);
  });
  ignored.forEach((entry, index) => {
    entry.parameter.data.copyFrom(TensorView.fromArray(ignoredValues[index]!, [...entry.shape]));
  });
  for (const [name, view] of model.namedBuffers()) view.copyFrom(unmanaged[name]!);
}

const sliceKey = (unit: string, handle: number, rank: number) => `${rank}\u0000${handle}\u0000${unit}`;

/**
 * The flat parameters the dicts hold (each unit's in order, numbered as in its unit) and their
 * slices by unit, position and rank. Replicas (hybrid-shard) hold equal slices: any one serves.
 */
function savedShards(dicts: readonly ShardedStateDict[]): {
  saved: SavedFlatParameter[];
  slices: Map<string, Float32Array>;
} {
  const saved = new Map<string, SavedFlatParameter>();
  const slices = new Map<string, Float32Array>();
  for (const dict of dicts) {
    const positions = new Map<string, number>();
    for (const entry of dict.handles) {
      const handle = positions.get(entry.unit) ?? 0;
      positions.set(entry.unit, handle + 1);
      const key = `${handle}\u0000${entry.unit}`;
      if (!saved.has(key)) saved.set(key, { unit: entry.unit, handle, layout: entry.metadata });
      slices.set(sliceKey(entry.unit, handle, entry.rank), entry.shard);
    }
  }
  return { saved: [...saved.values()], slices };
}
