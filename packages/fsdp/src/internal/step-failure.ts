import { CollectiveError, type ProcessGroup } from '@fsdp-ts/collectives';
import { FsdpError } from '../errors';

/**
 * [Note: step failure] An exception during a step on some ranks only leaves the others blocked
 * in, or mismatched with, collectives the failing ranks never issue; afterwards the ranks would
 * stay out of step for good. So any exception in forward or backward aborts every group FSDP uses
 * (`group.abort`, [Note: abort] in @fsdp-ts/collectives): the peers' pending collectives fail at
 * once with this rank's error, and every rank ends in the same state, the group broken with that
 * error, whichever subset of ranks threw. Recovery is a new group: restart from the last
 * checkpoint (fsdp-run --max-restarts does it).
 */
export function abortGroups(groups: readonly (ProcessGroup | null)[], error: unknown): void {
  for (const group of groups) group?.abort(error);
}

/** The rank whose failure aborted the step: a peer's abort names it; otherwise this rank. */
export function failedRank(error: unknown, rank: number): number {
  return error instanceof CollectiveError && error.code === 'aborted' && error.peer !== undefined
    ? error.peer
    : rank;
}

/** What forward throws after aborting: the failure, naming the rank that threw and its error. */
export function stepFailedError(error: unknown, rank: number): FsdpError {
  const origin = failedRank(error, rank);
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const where = origin === rank ? `rank ${rank} threw` : `rank ${origin} failed (seen on rank ${rank})`;
  return new FsdpError(
    `The step failed on every rank: ${where}: ${text} The process group is broken on every rank, so no rank stepped.`,
    {
      code: 'step-failed',
      rank: origin,
      cause: error,
      fix: `fix the input or code that failed on rank ${origin}, then restart from the last checkpoint (fsdp-run --max-restarts restarts the job).`,
    },
  );
}

/** After an exception in forward: aborts `groups` and returns what forward throws (see [Note: step failure]). */
export function forwardFailure(
  groups: readonly (ProcessGroup | null)[],
  error: unknown,
  rank: number,
): FsdpError {
  abortGroups(groups, error);
  return error instanceof FsdpError && error.code === 'step-failed' ? error : stepFailedError(error, rank);
}
