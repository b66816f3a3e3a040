import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DType, isDType, itemSize, type TypedArray, typedArrayFor } from '@fsdp-ts/tensor';
import { CheckpointError } from '../errors';
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
    checkName('buffer', name);
    const problem = bufferProblem(buffer);
    if (problem !== null) throw badInput(`buffer '${name}'`, problem);
  }
  for (const [name, document] of Object.entries(input.documents ?? {})) {
    checkName('document', name);
    if (document instanceof Uint8Array) continue;
    let text: string | undefined;
    try {
      text = JSON.stringify(document);
    } catch (error) {
      throw badInput(`document '${name}'`, {
        expected: 'a JSON value (object, array, string, number, boolean, null) or a Uint8Array',
        actual: `a value JSON.stringify rejects (${(error as Error).message})`,
        fix: 'remove cycles and BigInts from the document, or pass its bytes as a Uint8Array.',
      });
    }
    if (text === undefined) {
      throw badInput(`document '${name}'`, {
        expected: 'a JSON value (object, array, string, number, boolean, null) or a Uint8Array',
        actual: `a ${typeof document}, which JSON.stringify drops`,
        fix: 'pass a JSON value, or the bytes as a Uint8Array.',
      });
    }
  }
}

interface InputProblem {
  readonly expected: string;
  readonly actual: string;
  readonly fix: string;
}

/** What is wrong with a buffer given to a save, or null. */
function bufferProblem(buffer: CheckpointBuffer): InputProblem | null {
  if (!isDType(buffer.dtype)) {
    return {
      expected: 'a tensor dtype (float32, int32, bool, bfloat16, float16, ...)',
      actual: `dtype ${JSON.stringify(buffer.dtype)}`,
      fix: "set the buffer's dtype to the dtype of its values.",
    };
  }
  const arrayName = typedArrayFor(buffer.dtype, new ArrayBuffer(0), 0, 0).constructor.name;
  const givenName = buffer.values?.constructor?.name ?? String(buffer.values);
  if (givenName !== arrayName) {
    return {
      expected: `values in a ${arrayName} (the array of a ${buffer.dtype} buffer)`,
      actual: `a ${givenName}`,
      fix: `pass the values as a ${arrayName}, or give the dtype that matches a ${givenName}.`,
    };
  }
  const shape = Array.isArray(buffer.shape) ? buffer.shape : [];
  if (!Array.isArray(buffer.shape) || !shape.every((size) => Number.isSafeInteger(size) && size >= 0)) {
    return {
      expected: 'a shape of non-negative integer sizes, e.g. [4] or [2, 3] ([] for a scalar)',
      actual: `shape ${JSON.stringify(buffer.shape)}`,
      fix: "give the buffer's shape as a list of sizes.",
    };
  }
  const numel = shape.reduce((product, size) => product * size, 1);
  if (buffer.values.length !== numel) {
    return {
      expected: `${numel} values (shape [${shape.join(', ')}])`,
      actual: `${buffer.values.length} values`,
      fix: 'pass the shape of the values, or as many values as the shape holds.',
    };
  }
  return null;
}

function checkName(kind: 'buffer' | 'document', name: string): void {
  if (name.length > 0) return;
  throw badInput(`a ${kind} with an empty name`, {
    expected: `a non-empty ${kind} name (the key loading looks it up by)`,
    actual: "''",
    fix: `give every ${kind} a name.`,
  });
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

function badInput(what: string, problem: InputProblem): CheckpointError {
  return new CheckpointError(`Cannot save ${what}: expected ${problem.expected}, got ${problem.actual}.`, {
    reason: 'invalid-input',
    ...problem,
  });
}
