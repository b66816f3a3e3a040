import { type FlatParamLayout, locateParameterRange, type ShardPiece } from '@fsdp-ts/flat-param';
import { formatShape, shapesEqual } from '@fsdp-ts/tensor';
import type { FlatShard } from './flat-shard';

/** A saved flat parameter: its group, its position in the group, its layout. */
export interface SavedFlatParameter {
  readonly unit: string;
  readonly handle: number;
  readonly layout: FlatParamLayout;
}

/** Where a current parameter lives in the saved state. */
export interface SavedLocation {
  readonly unit: string;
  readonly handle: number;
  readonly layout: FlatParamLayout;
  /** Its first name in the saved state (the key of its optimizer state). */
  readonly name: string;
}

export interface ParameterMatch {
  /** By each current parameter's first name. */
  readonly matched: Map<string, SavedLocation>;
  /** One line per offender: missing, extra, or another shape or dtype. */
  readonly problems: string[];
  readonly offenders: string[];
}

/**
 * Matches the current flat parameters' parameters with the saved ones by name (any of a tied
 * parameter's names): groups and flat parameters may differ (another wrap policy, flattening,
 * world size); names, shapes and dtypes may not. Reports every offender; the caller throws its
 * own error (checkpoints: CheckpointError, state dicts: FsdpError).
 */
export function matchSavedParameters(
  saved: readonly SavedFlatParameter[],
  current: readonly Pick<FlatShard, 'layout'>[],
  source = 'the checkpoint',
): ParameterMatch {
  const byName = new Map<string, SavedLocation & { shape: readonly number[]; dtype: string }>();
  for (const entry of saved) {
    for (const parameter of entry.layout.parameters) {
      for (const name of parameter.names) {
        byName.set(name, {
          unit: entry.unit,
          handle: entry.handle,
          layout: entry.layout,
          name: parameter.names[0]!,
          shape: parameter.shape,
          dtype: entry.layout.dtype,
        });
      }
    }
  }
  const problems: string[] = [];
  const offenders: string[] = [];
  const matched = new Map<string, SavedLocation>();
  const used = new Set<string>();
  for (const { layout } of current) {
    for (const parameter of layout.parameters) {
      const name = parameter.names[0]!;
      const found = parameter.names
        .map((candidate) => byName.get(candidate))
        .find((value) => value !== undefined);
      if (found === undefined) {
        problems.push(`${name} is missing from ${source}`);
        offenders.push(name);
        continue;
      }
      for (const tied of found.layout.parameters.find((value) => value.names[0] === found.name)!.names)
        used.add(tied);
      if (!shapesEqual(found.shape, parameter.shape) || found.dtype !== layout.dtype) {
        problems.push(
          `${name} is ${formatShape(parameter.shape)} ${layout.dtype} in the model but ${formatShape(found.shape)} ${found.dtype} in ${source}`,
        );
        offenders.push(name);
        continue;
      }
      const { shape: _shape, dtype: _dtype, ...location } = found;
      matched.set(name, location);
    }
  }
  const extra = [...byName.keys()].filter((name) => !used.has(name));
  for (const name of extra) problems.push(`${name} is in ${source} but not in the model`);
  offenders.push(...extra);
  return { matched, problems, offenders };
}

/** Where one current parameter's part of a slice is in the saved state. */
export interface SavedRange {
  /** Index of the parameter in the current layout. */
  readonly index: number;
  readonly location: SavedLocation;
  /**
   * The saved ranks' slices holding it (any saved world size): element `offsetInParam + i` of the
   * parameter is saved rank `rank`'s element `offsetInShard + i` and goes to the current slice's
   * element `targetOffset + i`.
   */
  readonly pieces: readonly (ShardPiece & { readonly targetOffset: number })[];
}

/**
 * The saved ranges that fill a current slice, parameter by parameter: `locateParameterRange` on
 * the saved layout of each parameter's intersection with the slice. Parameters with nothing in the
 * slice, or that `include` rejects, are left out. The one index computation behind loading a
 * checkpoint (reads from files) and a sharded state dict (copies from memory).
 */
export function savedRanges(
  target: Pick<FlatShard, 'layout' | 'intersections'>,
  matched: ReadonlyMap<string, SavedLocation>,
  include: (location: SavedLocation) => boolean = () => true,
): SavedRange[] {
  const ranges: SavedRange[] = [];
  target.layout.parameters.forEach((parameter, index) => {
    const intersection = target.intersections[index]!;
    const location = matched.get(parameter.names[0]!)!;
    if (intersection.length === 0 || !include(location)) return;
    const pieces = locateParameterRange(
      location.layout,
      location.name,
      intersection.offsetInParam,
      intersection.length,
    ).map((piece) => ({
      ...piece,
      targetOffset: intersection.offsetInShard + (piece.offsetInParam - intersection.offsetInParam),
    }));
    ranges.push({ index, location, pieces });
  });
  return ranges;
}
