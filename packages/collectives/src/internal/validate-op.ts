import { CollectiveError } from '../errors.js';
import type { CollectiveBuffer, CollectiveDtype, CollectiveKind, ReduceOp } from '../types.js';
import { REDUCE_OPS } from './op-message.js';

type Caller = CollectiveKind | 'newGroup';

function invalid(
  kind: Caller,
  rank: number,
  message: string,
  expected: unknown,
  actual: unknown,
  fix: string,
): CollectiveError {
  return new CollectiveError(`${kind} on rank ${rank}: ${message}`, {
    code: 'invalid-argument',
    op: kind,
    rank,
    expected,
    actual,
    fix,
  });
}

/** A Uint16Array must be declared bfloat16. */
export function resolveDtype(
  kind: Caller,
  rank: number,
  buffer: unknown,
  declared: CollectiveDtype | undefined,
): CollectiveDtype {
  const actual =
    buffer instanceof Float32Array
      ? 'float32'
      : buffer instanceof Int32Array
        ? 'int32'
        : buffer instanceof Uint16Array
          ? 'bfloat16'
          : undefined;
  if (actual === undefined) {
    const name = (buffer as object | null)?.constructor?.name ?? String(buffer);
    throw invalid(
      kind,
      rank,
      `unsupported buffer ${name}.`,
      'Float32Array, Int32Array or Uint16Array (bfloat16)',
      name,
      'pass one of the supported typed arrays.',
    );
  }
  if (actual === 'bfloat16' && declared !== 'bfloat16') {
    throw invalid(
      kind,
      rank,
      'a Uint16Array is only accepted as bfloat16.',
      "{ dtype: 'bfloat16' }",
      declared ?? 'no dtype',
      "pass { dtype: 'bfloat16' } in the op's options.",
    );
  }
  if (declared !== undefined && declared !== actual) {
    throw invalid(
      kind,
      rank,
      `the buffer holds ${actual} but the options say ${declared}.`,
      actual,
      declared,
      'drop the dtype option or pass a matching buffer.',
    );
  }
  return actual;
}

export function checkSameDtype(
  kind: Caller,
  rank: number,
  output: CollectiveBuffer,
  input: CollectiveBuffer,
): void {
  if (output.constructor !== input.constructor) {
    throw invalid(
      kind,
      rank,
      'input and output must have the same element type.',
      input.constructor.name,
      output.constructor.name,
      'allocate both buffers with the same typed array class.',
    );
  }
}

export function checkReduceOp(kind: Caller, rank: number, op: ReduceOp, dtype: CollectiveDtype): void {
  if (!REDUCE_OPS.includes(op)) {
    throw invalid(
      kind,
      rank,
      `unknown reduction '${String(op)}'.`,
      REDUCE_OPS.join(' | '),
      op,
      'use sum, avg, max or min.',
    );
  }
  if (op === 'avg' && dtype === 'int32') {
    throw invalid(
      kind,
      rank,
      "'avg' is not defined for int32 buffers.",
      'float32 or bfloat16 for avg',
      dtype,
      "use 'sum' and divide yourself, or use a float buffer.",
    );
  }
}

export function checkWireDtype(kind: Caller, rank: number, wire: string, dtype: CollectiveDtype): void {
  if (wire !== 'float32' && wire !== 'bfloat16') {
    throw invalid(
      kind,
      rank,
      `unknown wireDtype '${wire}'.`,
      "'float32' | 'bfloat16'",
      wire,
      'omit wireDtype or pass bfloat16.',
    );
  }
  if (wire === 'bfloat16' && dtype !== 'float32') {
    throw invalid(
      kind,
      rank,
      `wireDtype 'bfloat16' applies to float32 buffers; this one holds ${dtype}.`,
      'float32',
      dtype,
      'drop the wireDtype option.',
    );
  }
}

export function checkLengths(
  kind: Caller,
  rank: number,
  outputLength: number,
  expectedLength: number,
  what: string,
): void {
  if (outputLength !== expectedLength) {
    throw invalid(
      kind,
      rank,
      `${what}: expected ${expectedLength} elements, got ${outputLength}.`,
      expectedLength,
      outputLength,
      'allocate output = size x input (allGather) or input = size x output (reduceScatter).',
    );
  }
}

export function checkRank(
  kind: Caller,
  rank: number,
  value: number,
  size: number,
  what: string,
  allowSelf: boolean,
): void {
  if (!Number.isInteger(value) || value < 0 || value >= size || (!allowSelf && value === rank)) {
    throw invalid(
      kind,
      rank,
      `${what} ${value} is not ${allowSelf ? 'a rank' : 'another rank'} of this group of size ${size}.`,
      `0 <= ${what} < ${size}${allowSelf ? '' : `, != ${rank}`}`,
      value,
      `pass a ${what} in [0, ${size}).`,
    );
  }
}

export interface Staged {
  shared: CollectiveBuffer;
  copyBack: (() => void) | undefined;
}

/**
 * [Note: staging] The worker reads and writes the caller's memory directly when the buffer is a
 * view over a SharedArrayBuffer. Any other buffer is copied once into fresh shared memory when
 * the op is issued and, for outputs, copied back when `wait()` or `await` sees the op succeed;
 * until then the caller's buffer keeps its old contents.
 */
export function stage(buffer: CollectiveBuffer, isOutput: boolean): Staged {
  if (buffer.buffer instanceof SharedArrayBuffer) return { shared: buffer, copyBack: undefined };
  const Constructor = buffer.constructor as new (memory: SharedArrayBuffer) => CollectiveBuffer;
  const shared = new Constructor(new SharedArrayBuffer(buffer.byteLength));
  shared.set(buffer as never);
  return { shared, copyBack: isOutput ? () => buffer.set(shared as never) : undefined };
}
