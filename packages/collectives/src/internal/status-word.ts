import { CollectiveError, type CollectiveErrorCode } from '../errors.js';

/**
 * [Note: status word] Each op owns a small SharedArrayBuffer the communication worker writes its
 * outcome into: Int32 slot 0 is the state (PENDING until the worker stores SUCCEEDED or FAILED
 * and notifies), slot 1 the byte length of a JSON error description that follows at byte 8. The
 * main thread may be blocked in Atomics.wait, so the error must travel in shared memory rather
 * than through postMessage.
 */
export const PENDING = 0;
export const SUCCEEDED = 1;
export const FAILED = 2;

/** The departure word ([Note: process exit]). */
export const DEPARTING = 1;
export const DEPARTED = 2;

const HEADER_BYTES = 8;
const STATUS_BYTES = 4096;
const WORDS_PER_SLAB = 64;

/**
 * [Note: status slab] Status words are carved in order from a slab of WORDS_PER_SLAB and never
 * reused: an op then costs no SharedArrayBuffer of its own (allocating one, cloning it to the
 * worker and collecting it cost more than the rest of a small op's submission), and a Work kept
 * long after its op still reads its own outcome. A slab is freed with the last Work over it.
 */
let slab: ArrayBuffer | SharedArrayBuffer | undefined;
let nextWord = WORDS_PER_SLAB;

export function createStatusWord(): Int32Array {
  if (nextWord === WORDS_PER_SLAB) {
    slab = new SharedArrayBuffer(STATUS_BYTES * WORDS_PER_SLAB);
    nextWord = 0;
  }
  return new Int32Array(slab!, STATUS_BYTES * nextWord++, STATUS_BYTES / 4);
}

export function markSucceeded(status: Int32Array): void {
  Atomics.store(status, 0, SUCCEEDED);
  Atomics.notify(status, 0);
}

interface SerializedError {
  message: string;
  code: CollectiveErrorCode;
  op?: string;
  rank?: number;
  peer?: number;
  expected?: unknown;
  actual?: unknown;
  fix?: string;
}

export function markFailed(status: Int32Array, error: unknown): void {
  const serialized = serializeError(error);
  const bytes = new TextEncoder().encode(JSON.stringify(serialized));
  const capacity = status.byteLength - HEADER_BYTES;
  const fitting =
    bytes.length <= capacity
      ? bytes
      : new TextEncoder().encode(
          JSON.stringify({
            ...serialized,
            expected: undefined,
            actual: undefined,
            message: serialized.message.slice(0, 1500),
          }),
        );
  new Uint8Array(status.buffer, status.byteOffset + HEADER_BYTES, Math.min(fitting.length, capacity)).set(
    fitting.subarray(0, capacity),
  );
  Atomics.store(status, 1, Math.min(fitting.length, capacity));
  Atomics.store(status, 0, FAILED);
  Atomics.notify(status, 0);
}

export function readFailure(status: Int32Array): CollectiveError {
  const length = Atomics.load(status, 1);
  const copy = new Uint8Array(length);
  copy.set(new Uint8Array(status.buffer, status.byteOffset + HEADER_BYTES, length));
  let parsed: SerializedError;
  try {
    parsed = JSON.parse(new TextDecoder().decode(copy)) as SerializedError;
  } catch {
    return new CollectiveError('The communication worker reported a failure it could not describe.', {
      code: 'closed',
    });
  }
  const error = new CollectiveError(parsed.message, { code: parsed.code });
  for (const field of DETAILS) Object.assign(error, { [field]: parsed[field] });
  return error;
}

const DETAILS = ['op', 'rank', 'peer', 'expected', 'actual', 'fix'] as const;

/** An outside engine module bundles its own copy of CollectiveError: `instanceof` alone misses it. */
function asCollectiveError(error: unknown): CollectiveError | undefined {
  if (error instanceof CollectiveError) return error;
  const looksLikeOne =
    error instanceof Error &&
    error.name === 'CollectiveError' &&
    typeof (error as { code?: unknown }).code === 'string';
  return looksLikeOne ? (error as CollectiveError) : undefined;
}

function serializeError(thrown: unknown): SerializedError {
  const error = asCollectiveError(thrown);
  if (error !== undefined) {
    const result: SerializedError = { message: error.message, code: error.code };
    for (const field of DETAILS)
      if (error[field] !== undefined) Object.assign(result, { [field]: error[field] });
    return result;
  }
  const message = thrown instanceof Error ? `${thrown.name}: ${thrown.message}` : String(thrown);
  return { message: `Internal error in the communication worker: ${message}`, code: 'closed' };
}
