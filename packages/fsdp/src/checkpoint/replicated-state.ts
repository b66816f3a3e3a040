import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DType, isDType, itemSize, type TypedArray, typedArrayFor } from '@fsdp-ts/tensor';
import { CheckpointError } from './checkpoint-error';
import { REPLICATED_STATE_FILE, type SavedReplicatedState } from './checkpoint-format';
import { writeFileDurably } from './durable-files';

/** A named tensor that is not a parameter (a module buffer, a batch-norm moving statistic). */
export interface CheckpointBuffer {
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Row-major elements (bfloat16/float16: their Uint16 words), as many as the shape holds. */
  readonly values: TypedArray;
}

/** A small named document: a JSON value (a model topology, the epoch and step), or raw bytes. */
export type CheckpointDocument = Uint8Array | null | boolean | number | string | object;

/** The non-parameter state of a checkpoint, by name (empty for checkpoints of format version 1 or 2). */
export interface ReplicatedState {
  /** Whether the checkpoint has the section at all (format version 3 or later). */
  readonly saved: boolean;
  readonly buffers: ReadonlyMap<string, CheckpointBuffer>;
  /** JSON documents come back parsed; byte documents as Uint8Array. */
  readonly documents: ReadonlyMap<string, CheckpointDocument>;
}

/** What writeCheckpoint is given for the section (see [Note: replicated state]). */
export interface ReplicatedStateInput {
  buffers?: Readonly<Record<string, CheckpointBuffer>>;
  documents?: Readonly<Record<string, CheckpointDocument>>;
}

/**
 * [Note: replicated state]
 * Parameters are sharded; some state is not: module buffers (batch-norm moving statistics, the
 * non-trainable weights of a tfjs model) are replicated, the same on every rank, and small
 * documents (a model topology, the epoch and step) describe the run. Format version 3 keeps them in
 * one file, `replicated-state.bin`, written once by rank 0 (rank 0's values are the saved ones, as
 * PyTorch DDP broadcasts rank 0's buffers): each buffer's raw little-endian elements and each
 * document's bytes (UTF-8 JSON, or the bytes given) one after the other, described in
 * metadata.json's `replicated` section (name, dtype, shape or kind, byte range) with the file's
 * size and SHA-256. Every loading rank needs all of it, so every rank reads the whole file and
 * checks its digest before anything is used (it is small: a buffer of a model's layer, not a
 * layer's weights). Checkpoints of format versions 1 and 2 have no section and load with none.
 */
export function checkReplicatedInput(input: ReplicatedStateInput): void {
  for (const [name, buffer] of Object.entries(input.buffers ?? {})) {
    const numel = buffer.shape.reduce((product, size) => product * size, 1);
    const expected = isDType(buffer.dtype)
      ? typedArrayFor(buffer.dtype, new ArrayBuffer(0), 0, 0).constructor.name
      : null;
    const problem =
      expected === null
        ? `dtype ${JSON.stringify(buffer.dtype)} is not a tensor dtype`
        : buffer.values?.constructor?.name !== expected
          ? `a ${buffer.dtype} buffer holds a ${expected}, not a ${buffer.values?.constructor?.name}`
          : !buffer.shape.every((size) => Number.isSafeInteger(size) && size >= 0)
            ? `shape [${buffer.shape.join(', ')}] is not a list of sizes`
            : buffer.values.length !== numel
              ? `shape [${buffer.shape.join(', ')}] holds ${numel} elements, the values ${buffer.values.length}`
              : null;
    if (problem !== null) throw badInput(`buffer '${name}'`, problem);
  }
  for (const [name, document] of Object.entries(input.documents ?? {})) {
    if (document instanceof Uint8Array) continue;
    let text: string | undefined;
    try {
      text = JSON.stringify(document);
    } catch (error) {
      throw badInput(`document '${name}'`, `it cannot be turned into JSON (${(error as Error).message})`);
    }
    if (text === undefined) throw badInput(`document '${name}'`, 'it is not a JSON value');
  }
}

/** Rank 0: writes the section's file into `directory` (fsynced); null when there is nothing to write. */
export function writeReplicatedState(
  directory: string,
  input: ReplicatedStateInput,
): SavedReplicatedState | null {
  const buffers = Object.entries(input.buffers ?? {});
  const documents = Object.entries(input.documents ?? {});
  if (buffers.length === 0 && documents.length === 0) return null;
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  const section: SavedReplicatedState = {
    file: REPLICATED_STATE_FILE,
    bytes: 0,
    sha256: '',
    buffers: [],
    documents: [],
  };
  for (const [name, buffer] of buffers) {
    const { values } = buffer;
    chunks.push(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
    section.buffers.push({
      name,
      dtype: buffer.dtype,
      shape: [...buffer.shape],
      byteOffset: bytes,
      byteLength: values.byteLength,
    });
    bytes += values.byteLength;
  }
  for (const [name, document] of documents) {
    const kind = document instanceof Uint8Array ? 'bytes' : 'json';
    const encoded = document instanceof Uint8Array ? document : Buffer.from(JSON.stringify(document), 'utf8');
    chunks.push(encoded);
    section.documents.push({ name, kind, byteOffset: bytes, byteLength: encoded.byteLength });
    bytes += encoded.byteLength;
  }
  const data = Buffer.concat(chunks);
  writeFileDurably(join(directory, REPLICATED_STATE_FILE), data);
  section.bytes = data.byteLength;
  section.sha256 = createHash('sha256').update(data).digest('hex');
  return section;
}

/** Reads and checks the section's file (every byte against its digest); empty when none was saved. */
export function readReplicatedState(
  directory: string,
  saved: SavedReplicatedState | null | undefined,
): ReplicatedState {
  const buffers = new Map<string, CheckpointBuffer>();
  const documents = new Map<string, CheckpointDocument>();
  if (saved === undefined) return { saved: false, buffers, documents };
  if (saved === null) return { saved: true, buffers, documents };
  const path = join(directory, saved.file);
  if (!existsSync(path)) {
    throw new CheckpointError(`${path} is missing; it holds the checkpoint's buffers and documents.`, {
      reason: 'missing',
      file: path,
      fix: 'restore the file from a copy of the checkpoint, or load an older checkpoint.',
    });
  }
  const data = readFileSync(path);
  const digest = createHash('sha256').update(data).digest('hex');
  if (data.byteLength !== saved.bytes || digest !== saved.sha256) {
    const names = [...saved.buffers, ...saved.documents].map((entry) => entry.name);
    throw new CheckpointError(
      `${path} fails its SHA-256 check (${data.byteLength} bytes, ${saved.bytes} recorded); it holds ${names.join(', ')}.`,
      {
        reason: data.byteLength < saved.bytes ? 'truncated' : 'corrupt',
        file: path,
        parameters: names,
        expected: saved.sha256,
        actual: digest,
        fix: 'the file is damaged: restore it from a copy, or load an older checkpoint.',
      },
    );
  }
  for (const entry of saved.buffers) {
    const bytes = slice(path, data, entry);
    const dtype = entry.dtype;
    const numel = entry.shape.reduce((product, size) => product * size, 1);
    if (!isDType(dtype) || numel * itemSize(dtype) !== entry.byteLength) {
      throw corruptEntry(path, entry.name, `${entry.byteLength} bytes for a ${dtype} [${entry.shape}]`);
    }
    const values = typedArrayFor(dtype, bytes.buffer, bytes.byteOffset, numel);
    buffers.set(entry.name, { dtype, shape: [...entry.shape], values });
  }
  for (const entry of saved.documents) {
    const bytes = slice(path, data, entry);
    if (entry.kind === 'bytes') {
      documents.set(entry.name, bytes);
      continue;
    }
    try {
      documents.set(entry.name, JSON.parse(Buffer.from(bytes).toString('utf8')) as CheckpointDocument);
    } catch (error) {
      throw corruptEntry(path, entry.name, `not JSON (${(error as Error).message})`);
    }
  }
  return { saved: true, buffers, documents };
}

/** A fresh, aligned copy of an entry's bytes (typed arrays need their element alignment). */
function slice(
  path: string,
  data: Buffer,
  entry: { name: string; byteOffset: number; byteLength: number },
): Uint8Array {
  const { byteOffset, byteLength } = entry;
  if (!Number.isSafeInteger(byteOffset) || byteOffset < 0 || byteOffset + byteLength > data.byteLength) {
    throw corruptEntry(
      path,
      entry.name,
      `bytes ${byteOffset}..${byteOffset + byteLength} lie outside the file`,
    );
  }
  return new Uint8Array(data.subarray(byteOffset, byteOffset + byteLength));
}

function corruptEntry(path: string, name: string, what: string): CheckpointError {
  return new CheckpointError(`${path}: the entry '${name}' is ${what}.`, {
    reason: 'corrupt',
    file: path,
    parameters: [name],
    fix: 'the checkpoint is damaged or edited: load an older one.',
  });
}

function badInput(what: string, problem: string): CheckpointError {
  return new CheckpointError(`Cannot save ${what}: ${problem}.`, {
    reason: 'io',
    expected:
      'buffers as { dtype, shape, values } with the dtype’s typed array; documents as JSON values or bytes',
    actual: problem,
    fix: `pass ${what} as the checkpoint format describes it (see CheckpointBuffer, CheckpointDocument).`,
  });
}
