import { createHash } from 'node:crypto';
import { CheckpointError } from '../errors';
import type { CheckpointMetadata } from './checkpoint-format';

/**
 * [Note: metadata digest]
 * metadata.json starts with `{\n "metadataSha256": "<64 hex digits>",`: the SHA-256 of the file's
 * bytes with those 64 digits replaced by zeros. A reader checks it on the raw bytes before it
 * parses the JSON or uses any offset, so any changed byte (a flipped bit in a `byteOffset`, a
 * digest, a name) fails the load naming metadata.json. Files of format version 1, written before
 * the digest existed, have no such field.
 */
const PREFIX = '{\n "metadataSha256": "';
const ZEROS = '0'.repeat(64);
const HEX = /^[0-9a-f]{64}$/;

/** The text of metadata.json, digest included. */
export function serializeMetadata(metadata: CheckpointMetadata): string {
  const text = `${JSON.stringify({ metadataSha256: ZEROS, ...metadata }, null, 1)}\n`;
  const digest = createHash('sha256').update(text).digest('hex');
  return `${PREFIX}${digest}${text.slice(PREFIX.length + ZEROS.length)}`;
}

/** Whether the bytes carry a digest field where serializeMetadata puts it. */
export function hasMetadataDigest(bytes: Buffer): boolean {
  return bytes.subarray(0, PREFIX.length).toString('latin1') === PREFIX;
}

/** Throws CheckpointError('corrupt') naming `file` unless the bytes match their digest. */
export function verifyMetadataDigest(file: string, bytes: Buffer): void {
  const recorded = bytes.subarray(PREFIX.length, PREFIX.length + 64).toString('latin1');
  const zeroed = Buffer.from(bytes);
  zeroed.write(ZEROS, PREFIX.length, 'latin1');
  const actual = createHash('sha256').update(zeroed).digest('hex');
  if (!HEX.test(recorded) || actual !== recorded) {
    throw new CheckpointError(
      `${file} fails its SHA-256 check (metadataSha256): the file was changed or damaged.`,
      {
        reason: 'corrupt',
        file,
        expected: recorded,
        actual,
        fix: 'restore metadata.json from a copy of the checkpoint, or load an older checkpoint.',
      },
    );
  }
}
