import { join } from 'node:path';
import { type FlatParamLayout, locateParameterRange } from '@fsdp-ts/flat-param';
import { formatShape, shapesEqual } from '@fsdp-ts/tensor';
import { CheckpointError } from './checkpoint-error';
import {
  type CheckpointMetadata,
  type DataFileEntry,
  METADATA_FILE,
  type Segment,
} from './checkpoint-format';
import type { ModelHandle } from './model-shards';
import type { PlannedRead } from './verified-range-reader';

/** Where a parameter of the model lives in the checkpoint. */
export interface SavedLocation {
  unit: string;
  handle: number;
  layout: FlatParamLayout;
  /** Its first name in the checkpoint (the key of its optimizer state). */
  name: string;
}

/**
 * Matches the model's parameters with the checkpoint's by name (any of a tied parameter's names):
 * the units and handles may differ (another wrap policy, flattening, world size); names, shapes
 * and dtypes may not. Every offender is named in one CheckpointError('model-mismatch').
 */
export function matchParameters(
  directory: string,
  metadata: CheckpointMetadata,
  handles: readonly ModelHandle[],
): Map<string, SavedLocation> {
  const saved = new Map<string, SavedLocation & { shape: readonly number[]; dtype: string }>();
  for (const entry of metadata.handles) {
    for (const parameter of entry.layout.parameters) {
      for (const name of parameter.names) {
        saved.set(name, {
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
  for (const entry of handles) {
    for (const parameter of entry.handle.layout.parameters) {
      const name = parameter.names[0]!;
      const found = parameter.names
        .map((candidate) => saved.get(candidate))
        .find((value) => value !== undefined);
      if (found === undefined) {
        problems.push(`${name} is missing from the checkpoint`);
        offenders.push(name);
        continue;
      }
      for (const tied of found.layout.parameters.find((value) => value.names[0] === found.name)!.names)
        used.add(tied);
      if (!shapesEqual(found.shape, parameter.shape) || found.dtype !== entry.handle.layout.dtype) {
        problems.push(
          `${name} is ${formatShape(parameter.shape)} ${entry.handle.layout.dtype} in the model but ${formatShape(found.shape)} ${found.dtype} in the checkpoint`,
        );
        offenders.push(name);
        continue;
      }
      matched.set(name, found);
    }
  }
  const extra = [...saved.keys()].filter((name) => !used.has(name));
  for (const name of extra) problems.push(`${name} is in the checkpoint but not in the model`);
  offenders.push(...extra);
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
 * The reads that fill `target` (laid out like the handle's live slice `entry.data`) with
 * `buffer` ('parameters' or an optimizer buffer) for the parameters `include` accepts, wherever
 * the checkpoint holds them (any saved world size: locateParameterRange on the saved layout).
 */
export function planBufferReads(
  directory: string,
  metadata: CheckpointMetadata,
  entry: ModelHandle,
  buffer: string,
  target: Float32Array,
  matched: ReadonlyMap<string, SavedLocation>,
  include: (location: SavedLocation) => boolean = () => true,
): PlannedRead[] {
  const files = new Map<number, DataFileEntry>(metadata.files.map((file) => [file.rank, file]));
  const reads: PlannedRead[] = [];
  entry.handle.layout.parameters.forEach((parameter, index) => {
    const intersection = entry.handle.intersections[index]!;
    const location = matched.get(parameter.names[0]!)!;
    if (intersection.length === 0 || !include(location)) return;
    const pieces = locateParameterRange(
      location.layout,
      location.name,
      intersection.offsetInParam,
      intersection.length,
    );
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
        targetOffset: intersection.offsetInShard + (piece.offsetInParam - intersection.offsetInParam),
        parameter: location.name,
      });
    }
  });
  return reads;
}
