import { locateParameterRange, type ShardPiece } from '@fsdp-ts/flat-param';
import type { FlatShard } from './flat-shard';
import type { SavedLocation } from './saved-parameters';

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
