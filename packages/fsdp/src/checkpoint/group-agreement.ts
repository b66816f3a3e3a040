import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import { CheckpointError } from './checkpoint-error';

/**
 * [Note: collective failure]
 * Checkpoint functions are collectives: a rank that fails must not leave the others waiting in the
 * next op, and no rank may report success for a checkpoint another rank failed to write or read.
 * After each phase every rank contributes whether it failed (all-reduce max of rank + 1); then
 * every rank throws: the failing rank its own error, the others a CheckpointError 'peer-failed'
 * naming the rank.
 */
export function throwIfAnyRankFailed(group: ProcessGroup, localError: unknown, phase: string): void {
  const flag = allocateShared(Int32Array, 1);
  flag[0] = localError === undefined ? 0 : group.rank + 1;
  group.allReduce(flag, { op: 'max' }).wait();
  if (localError !== undefined) throw localError;
  const failed = flag[0]!;
  if (failed > 0) {
    throw new CheckpointError(
      `${phase} failed on rank ${failed - 1} (its error names the file and parameter).`,
      {
        reason: 'peer-failed',
        rank: group.rank,
        actual: failed - 1,
        fix: `look at rank ${failed - 1}'s error.`,
      },
    );
  }
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
  if (localError !== undefined) throw localError;
  if (buffer[1] !== 0) {
    throw new CheckpointError(`${phase} failed on rank ${root} (its error names the file and parameter).`, {
      reason: 'peer-failed',
      rank: group.rank,
      actual: root,
      fix: `look at rank ${root}'s error.`,
    });
  }
  return buffer[0]!;
}
