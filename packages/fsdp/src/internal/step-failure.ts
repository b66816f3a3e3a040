import { CollectiveError, type ProcessGroup } from '@fsdp-ts/collectives';
import { FsdpError } from '../errors';

/**
 * [Note: step failure] An exception during a step on some ranks only leaves the others blocked
 * in, or mismatched with, collectives the failing ranks never issue; afterwards the ranks would
 * stay out of step for good. The same exception on every rank at the same point (the same bad
 * batch everywhere) leaves nothing out of step. So after any exception in forward, the loss or
 * backward, each group FSDP uses (the shard group, then the replicate group) is asked whether
 * every rank failed alike (`group.recoverOrAbort`, [Note: failure agreement] in
 * @fsdp-ts/collectives: the same number of collectives issued on the group and the same error
 * name, code and message):
 * - yes, on every group: nothing is aborted; the step's state is reset (StepLifecycle.abort,
 *   forward's finally: gathered units resharded after their all-gathers finished, reduce-scatters
 *   waited for, unreduced gradients dropped, the training state idle) and every rank throws
 *   FsdpError 'step-failed' with `groupBroken` false: no rank stepped, and the next step trains.
 * - no (a one-sided failure, different points or errors, a failed collective, a timeout): every
 *   group is aborted as `group.abort` does ([Note: abort]): the peers' pending collectives fail at
 *   once with this rank's error, every rank ends with the group broken and throws 'step-failed'
 *   with `groupBroken` true. Recovery is a new group, or restarting the job from its last
 *   checkpoint (fsdp-run --max-restarts does it) once the cause is fixed.
 * A failed collective (CollectiveError) is never agreed on: its group already failed, or its
 * ranks issued different ops.
 */
export interface StepFailureOutcome {
  /** Every rank failed alike and every group stays usable. */
  recovered: boolean;
  /** Why the ranks could not agree, when a group said so. */
  reason?: CollectiveError;
}

/** See [Note: step failure]: agrees on `error` over `groups`, or aborts them all. */
export function settleStepFailure(
  groups: readonly (ProcessGroup | null)[],
  error: unknown,
): StepFailureOutcome {
  const distinct = [...new Set(groups.filter((group): group is ProcessGroup => group !== null))];
  const abortAll = () => {
    for (const group of distinct) group.abort(error);
  };
  if (error instanceof CollectiveError) {
    abortAll();
    return { recovered: false };
  }
  for (const group of distinct) {
    const agreement = group.recoverOrAbort(error);
    if (!agreement.recovered) {
      abortAll();
      return { recovered: false, reason: agreement.reason };
    }
  }
  return { recovered: true };
}

/** The rank whose failure aborted the step: a peer's abort names it; otherwise this rank. */
export function failedRank(error: unknown, rank: number): number {
  return error instanceof CollectiveError && error.code === 'aborted' && error.peer !== undefined
    ? error.peer
    : rank;
}

/** Whether `error` is a step failure FSDP already settled (a nested wrapper's, or forward's inside backward). */
export function isSettledStepFailure(error: unknown): error is FsdpError {
  return error instanceof FsdpError && error.code === 'step-failed';
}

/** What a failed step throws (see [Note: step failure]): the failure, where it happened, and what to do. */
export function stepFailedError(error: unknown, rank: number, outcome: StepFailureOutcome): FsdpError {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  if (outcome.recovered) {
    return new FsdpError(
      // The same words on every rank (no rank number), so a report of the job shows it once.
      `The step failed on every rank alike: ${text} Every rank failed at the same point with the same error, so no rank stepped and the process group stays usable.`,
      {
        code: 'step-failed',
        rank,
        groupBroken: false,
        cause: error,
        fix: 'fix the input or code that failed (the same on every rank); the job need not restart: the next step trains, so skipping or correcting the batch is enough.',
      },
    );
  }
  const origin = failedRank(error, rank);
  const where = origin === rank ? `rank ${rank} threw` : `rank ${origin} failed (seen on rank ${rank})`;
  const why = outcome.reason === undefined ? '' : ` ${withoutFix(outcome.reason)}`;
  return new FsdpError(
    `The step failed on every rank: ${where}: ${text}${why} The process group is broken on every rank, so no rank stepped.`,
    {
      code: 'step-failed',
      rank: origin,
      groupBroken: true,
      cause: error,
      fix: `fix the input or code that failed on rank ${origin} first: a restart does not fix a bug in the code or the data, the restarted job fails the same way. Then restart from the last checkpoint (fsdp-run --max-restarts restarts the job) or build a new group.`,
    },
  );
}

/** After an exception in forward: settles it over `groups` and returns what forward throws (see [Note: step failure]). */
export function forwardFailure(
  groups: readonly (ProcessGroup | null)[],
  error: unknown,
  rank: number,
): FsdpError {
  if (isSettledStepFailure(error)) return error;
  return stepFailedError(error, rank, settleStepFailure(groups, error));
}

/** A CollectiveError's message without its " Fix: ..." tail (the step-failed error states its own fix). */
function withoutFix(error: CollectiveError): string {
  const tail = error.fix === undefined ? '' : ` Fix: ${error.fix}`;
  return tail !== '' && error.message.endsWith(tail) ? error.message.slice(0, -tail.length) : error.message;
}
