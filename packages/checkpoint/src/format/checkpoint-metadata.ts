import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseFlatParamMetadata } from '@fsdp-ts/flat-param';
import { CheckpointError } from '../errors';
import { type CheckpointLog, findLatestCheckpoint } from './checkpoint-directory';
import {
  CHECKPOINT_FORMAT,
  CHECKPOINT_FORMAT_VERSION,
  type CheckpointMetadata,
  METADATA_FILE,
} from './checkpoint-format';
import { hasMetadataDigest, verifyMetadataDigest } from './metadata-digest';

/** Format versions this reader loads (1 and 2 have no replicated section). */
const READABLE_VERSIONS: readonly number[] = [1, 2, CHECKPOINT_FORMAT_VERSION];

/**
 * The step directory `path` names: itself when it holds metadata.json; else, for a root of
 * checkpoints, the one findLatestCheckpoint picks (see [Note: which checkpoint a root resumes
 * from]). Throws CheckpointError('missing') when there is none.
 */
export function resolveCheckpointDirectory(path: string, log?: CheckpointLog): string {
  if (existsSync(join(path, METADATA_FILE))) return path;
  const latest = findLatestCheckpoint(path, log);
  if (latest === null) throw missingMetadata(path);
  return latest;
}

/** Reads and checks metadata.json of a step directory. */
export function readCheckpointMetadata(directory: string): CheckpointMetadata {
  const file = join(directory, METADATA_FILE);
  if (!existsSync(file)) throw missingMetadata(directory);
  const bytes = readFileSync(file);
  const digested = hasMetadataDigest(bytes);
  if (digested) verifyMetadataDigest(file, bytes);
  let metadata: CheckpointMetadata;
  try {
    metadata = JSON.parse(bytes.toString('utf8')) as CheckpointMetadata;
  } catch (error) {
    throw corrupt(file, 'is not valid JSON', error);
  }
  if (typeof metadata?.formatVersion === 'number' && metadata.formatVersion >= 2 && !digested) {
    throw corrupt(file, 'lacks its metadataSha256 digest (it opens with something else)');
  }
  if (metadata?.format !== CHECKPOINT_FORMAT || !READABLE_VERSIONS.includes(metadata.formatVersion)) {
    throw new CheckpointError(
      `${file} is not a ${CHECKPOINT_FORMAT} checkpoint of format version ${READABLE_VERSIONS.join(', ')}.`,
      {
        reason: 'corrupt',
        file,
        expected: { format: CHECKPOINT_FORMAT, formatVersion: CHECKPOINT_FORMAT_VERSION },
        actual: { format: metadata?.format, formatVersion: metadata?.formatVersion },
        fix: 'load it with the version of @fsdp-ts/fsdp that wrote it.',
      },
    );
  }
  if (!Array.isArray(metadata.handles) || !Array.isArray(metadata.files)) {
    throw corrupt(file, 'lacks its handles or files lists');
  }
  const replicated = metadata.replicated;
  if (
    metadata.formatVersion >= 3 &&
    replicated !== null &&
    (typeof replicated !== 'object' ||
      !Array.isArray(replicated.buffers) ||
      !Array.isArray(replicated.documents))
  ) {
    throw corrupt(file, 'lacks its replicated section (null or { buffers, documents })');
  }
  for (const saved of metadata.handles) {
    try {
      parseFlatParamMetadata(saved.layout);
    } catch (error) {
      throw corrupt(file, `has an invalid layout for unit '${saved.unit}' handle ${saved.handle}`, error);
    }
  }
  return metadata;
}

function missingMetadata(directory: string): CheckpointError {
  const file = join(directory, METADATA_FILE);
  return new CheckpointError(`No checkpoint at ${directory}: ${file} is missing.`, {
    reason: 'missing',
    file,
    fix: 'pass a step directory written by saveCheckpoint (or its root); a directory without metadata.json is incomplete or damaged: load an older step.',
  });
}

function corrupt(file: string, what: string, cause?: unknown): CheckpointError {
  return new CheckpointError(`${file} ${what}.`, {
    reason: 'corrupt',
    file,
    ...(cause === undefined ? {} : { cause }),
    fix: 'restore metadata.json from a copy, or load an older checkpoint.',
  });
}
