import { join } from 'node:path';
import { CheckpointError } from '../errors';
import {
  type CheckpointMetadata,
  type DataFileEntry,
  METADATA_FILE,
  type Segment,
} from '../format/checkpoint-format';
import type { FlatShard } from '../sharded-state/flat-shard';
import { matchSavedParameters, type SavedLocation, savedRanges } from '../sharded-state/saved-parameters';
import type { PlannedRead } from './verified-range-reader';

export type { SavedLocation } from '../sharded-state/saved-parameters';

/**
 * Matches the model's parameters with the checkpoint's by name (matchSavedParameters); every
 * offender is named in one CheckpointError('model-mismatch').
 */
export function matchParameters(
  directory: string,
  metadata: CheckpointMetadata,
  shards: readonly FlatShard[],
): Map<string, SavedLocation> {
  const { matched, problems, offenders } = matchSavedParameters(metadata.handles, shards);
  if (problems.length > 0) {
    const file = join(directory, METADATA_FILE);
    throw new CheckpointError(`The checkpoint ${file} does not fit the model: ${problems.join('; ')}.`, {
      reason: 'model-mismatch',
      file,
      parameters: offenders,
      expected: 'the same parameter names, shapes and dtypes',
      actual: problems,
      fix: 'build the model with the configuration the checkpoint was saved with.',
    });
  }
  return matched;
}

/**
 * The reads that fill `target` (laid out like the slice `shard.data`) with `buffer`
 * ('parameters' or an optimizer buffer) for the parameters `include` accepts, wherever the
 * checkpoint holds them (savedRanges: any saved world size).
 */
export function planBufferReads(
  directory: string,
  metadata: CheckpointMetadata,
  shard: FlatShard,
  buffer: string,
  target: Float32Array,
  matched: ReadonlyMap<string, SavedLocation>,
  include: (location: SavedLocation) => boolean = () => true,
): PlannedRead[] {
  const files = new Map<number, DataFileEntry>(metadata.files.map((file) => [file.rank, file]));
  const reads: PlannedRead[] = [];
  for (const { location, pieces } of savedRanges(shard, matched, include)) {
    for (const piece of pieces) {
      const file = files.get(piece.rank);
      const segment = file?.segments.find(
        (candidate: Segment) =>
          candidate.unit === location.unit &&
          candidate.handle === location.handle &&
          candidate.buffer === buffer,
      );
      if (file === undefined || segment === undefined || piece.offsetInShard + piece.length > segment.numel) {
        const where =
          file === undefined
            ? `no data file for rank ${piece.rank}`
            : `no '${buffer}' segment in ${file.file}`;
        throw new CheckpointError(
          `${join(directory, METADATA_FILE)} lists ${where} holding ${location.name}.`,
          {
            reason: 'corrupt',
            file: join(directory, file?.file ?? METADATA_FILE),
            parameters: [location.name],
            fix: 'the checkpoint is incomplete or edited: load an older one.',
          },
        );
      }
      reads.push({
        file,
        byteOffset: segment.byteOffset + piece.offsetInShard * 4,
        byteLength: piece.length * 4,
        target,
        targetOffset: piece.targetOffset,
        parameter: location.name,
      });
    }
  }
  return reads;
}
