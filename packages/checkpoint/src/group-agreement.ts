import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import { FsdpTsError } from '@fsdp-ts/errors';
import { CheckpointError } from './errors';

/**
 * [Note: collective failure]
 * Checkpoint functions are collectives: a rank that fails must not leave the others waiting in the
 * next op, and no rank may report success for a checkpoint another rank failed to write or read.
 * After each phase every rank contributes whether it failed (all-reduce max of rank + 1); then
 * every rank throws: the failing rank its own error (its `rank` set), the others a CheckpointError
 * 'peer-failed' naming the failing rank, its file and its message (see [Note: every rank names the file]).
 */
export function throwIfAnyRankFailed(group: ProcessGroup, localError: unknown, phase: string): void {
  const flag = allocateShared(Int32Array, 1);
  flag[0] = localError === undefined ? 0 : group.rank + 1;
  group.allReduce(flag, { op: 'max' }).wait();
  const failed = flag[0]! - 1;
  if (failed < 0) return;
  const found = shareFailure(group, failed, localError);
  if (localError !== undefined) throw withRank(localError, group.rank);
  throw peerFailed(group, phase, failed, found);
}

/** Rank `root`'s integer value on every rank, or the peer-failed error if `root` failed. */
export function broadcastOutcome(
  group: ProcessGroup,
  value: number,
  localError: unknown,
  phase: string,
  root = 0,
): number {
  const buffer = allocateShared(Int32Array, 2);
  buffer[0] = value;
  buffer[1] = localError === undefined ? 0 : 1;
  group.broadcast(buffer, { root }).wait();
  if (buffer[1] === 0) return buffer[0]!;
  const found = shareFailure(group, root, localError);
  if (localError !== undefined) throw withRank(localError, group.rank);
  throw peerFailed(group, phase, root, found);
}

/** What the failing rank found, as every rank learns it. */
interface SharedFailure {
  message: string;
  file: string | undefined;
}

const FAILURE_BYTES = 4096;

/**
 * [Note: every rank names the file]
 * Once every rank knows which rank failed, that rank broadcasts its error's message and file
 * (UTF-8 JSON, at most 4 KiB, in an int32 buffer), so every rank's error says which file and
 * which rank, not only the failing rank's.
 */
function shareFailure(group: ProcessGroup, failed: number, localError: unknown): SharedFailure {
  const buffer = allocateShared(Int32Array, FAILURE_BYTES / 4);
  const bytes = new Uint8Array(buffer.buffer, buffer.byteOffset, FAILURE_BYTES);
  if (group.rank === failed) {
    const error = localError as { message?: unknown; file?: unknown } | undefined;
    const described: SharedFailure = {
      message: String(error?.message ?? localError).slice(0, 1500),
      file: typeof error?.file === 'string' ? error.file : undefined,
    };
    const encoded = new TextEncoder().encode(JSON.stringify(described));
    bytes.set(encoded.subarray(0, FAILURE_BYTES));
  }
  group.broadcast(buffer, { root: failed }).wait();
  const end = bytes.indexOf(0);
  try {
    return JSON.parse(
      new TextDecoder().decode(bytes.subarray(0, end < 0 ? FAILURE_BYTES : end)),
    ) as SharedFailure;
  } catch {
    return { message: 'an error (its message did not fit)', file: undefined };
  }
}

/**
 * The failing rank's own error, its `rank` and message naming this rank: an error with a `rank`
 * field (FsdpError, CheckpointError) that has none yet.
 */
function withRank(error: unknown, rank: number): unknown {
  if (FsdpTsError.isInstance(error) && 'rank' in error && error.rank === undefined) {
    Object.defineProperty(error, 'rank', { value: rank, enumerable: true });
    error.message = `Rank ${rank}: ${error.message}`;
  }
  return error;
}

function peerFailed(
  group: ProcessGroup,
  phase: string,
  failed: number,
  found: SharedFailure,
): CheckpointError {
  return new CheckpointError(
    `${phase} failed on rank ${failed}${found.file === undefined ? '' : ` (${found.file})`}: ${found.message}`,
    {
      reason: 'peer-failed',
      ...(found.file === undefined ? {} : { file: found.file }),
      rank: group.rank,
      actual: failed,
      fix: `rank ${failed}'s error above says what to do.`,
    },
  );
}
