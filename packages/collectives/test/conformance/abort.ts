import { allocateShared, CollectiveError, type ProcessGroup } from '../../src/index.js';
import type { CaseOutcome } from './run-conformance.js';

/** Why `error` is not the abort error of `aborting` (undefined when it is). */
function wrongAbortError(error: unknown, aborting: number, what: string): string | undefined {
  if (!(error instanceof CollectiveError))
    return `${what} threw ${String(error)}, expected a CollectiveError`;
  if (error.code !== 'aborted') return `${what} failed with code '${error.code}' (${error.message})`;
  if (error.peer !== aborting) return `${what} names rank ${error.peer}, expected ${aborting}`;
  if (!error.message.includes(`boom on rank ${aborting}`))
    return `${what}'s message lacks the aborting rank's error: ${error.message}`;
  return undefined;
}

async function expectAborted(run: () => PromiseLike<void>, aborting: number, what: string) {
  try {
    await run();
    return `${what} succeeded after the abort`;
  } catch (error) {
    return wrongAbortError(error, aborting, what);
  }
}

/**
 * group.abort: for the first, a middle and the last rank, a fresh group of every rank where that
 * rank aborts while the others wait in an all-reduce. Every rank's pending op and next op must
 * fail with code 'aborted' naming the aborting rank and its error; the world group stays usable.
 */
export async function abortOutcomes(world: ProcessGroup): Promise<CaseOutcome[]> {
  const { rank, size } = world;
  const members = Array.from({ length: size }, (_, index) => index);
  const outcomes: CaseOutcome[] = [];
  for (const aborting of [...new Set([0, Math.floor(size / 2), size - 1])]) {
    const name = `abort by rank ${aborting} of ${size}`;
    const group = await world.newGroup(members);
    let failure: string | undefined;
    try {
      await group.barrier();
      // Every rank is past the group's barrier before the abort: a barrier can complete on one
      // rank while a peer still waits for its last message, and the abort would fail that.
      await world.barrier();
      const buffer = allocateShared(Float32Array, 16).fill(1);
      if (rank === aborting) group.abort(new Error(`boom on rank ${aborting}`));
      failure = await expectAborted(() => group.allReduce(buffer), aborting, 'the pending all-reduce');
      failure ??= await expectAborted(() => group.barrier(), aborting, 'the next barrier');
    } catch (error) {
      failure = String(error);
    }
    // Every rank has seen the abort before any destroys the group: a rank whose peer's port
    // closed first would see that closure (peer-lost) before the abort notice, which travels on
    // another connection (no order between connections).
    await world.barrier();
    await group.destroy();
    const after = allocateShared(Float32Array, 4).fill(1);
    await world.allReduce(after);
    if (after[0] !== size) failure ??= `the world all-reduce afterwards gave ${after[0]}, expected ${size}`;
    outcomes.push({ name, ...(failure === undefined ? {} : { failure: `rank ${rank}: ${failure}` }) });
  }
  return outcomes;
}

type AgreementCase = 'alike' | 'one-sided' | 'different errors';

/**
 * group.recoverOrAbort ([Note: failure agreement]) on a fresh group of every rank:
 * - 'alike': every rank has an all-reduce in flight and then fails with the same error: every
 *   rank recovers, the all-reduce completed, and the group runs the next ops;
 * - 'one-sided': the last rank fails while the others wait in an all-reduce: their op fails with
 *   code 'aborted' naming it and its error, it gets the reason, and the group is broken everywhere;
 * - 'different errors': every rank fails with its own error: no rank recovers, the group is broken.
 * The world group stays usable.
 */
export async function failureAgreementOutcomes(world: ProcessGroup): Promise<CaseOutcome[]> {
  const { rank, size } = world;
  const members = Array.from({ length: size }, (_, index) => index);
  const failing = size - 1;
  const outcomes: CaseOutcome[] = [];
  for (const kind of ['alike', 'one-sided', 'different errors'] as AgreementCase[]) {
    const name = `recoverOrAbort, ${kind}, ${size} ranks`;
    const group = await world.newGroup(members);
    let failure: string | undefined;
    try {
      await group.barrier();
      await world.barrier();
      const buffer = allocateShared(Float32Array, 16).fill(1);
      if (kind === 'alike') {
        const pending = group.allReduce(buffer);
        const agreement = group.recoverOrAbort(new Error('the same on every rank'));
        if (!agreement.recovered) failure = `did not recover: ${agreement.reason.message}`;
        await pending;
        if (buffer[0] !== size) failure ??= `the all-reduce before it gave ${buffer[0]}, expected ${size}`;
        await group.barrier();
        const after = allocateShared(Float32Array, 4).fill(2);
        await group.allReduce(after);
        if (after[0] !== 2 * size)
          failure ??= `the all-reduce after it gave ${after[0]}, expected ${2 * size}`;
      } else if (kind === 'one-sided') {
        if (rank === failing) {
          const agreement = group.recoverOrAbort(new Error(`boom on rank ${failing}`));
          if (agreement.recovered) failure = 'the failing rank recovered alone';
        } else
          failure = await expectAborted(() => group.allReduce(buffer), failing, 'the pending all-reduce');
        failure ??= await expectAborted(() => group.barrier(), failing, 'the next barrier');
      } else {
        const agreement = group.recoverOrAbort(new Error(`boom on rank ${rank}`));
        if (agreement.recovered) failure = 'recovered from different errors';
        else if (agreement.reason.code !== 'aborted')
          failure = `the reason has code '${agreement.reason.code}': ${agreement.reason.message}`;
        try {
          await group.barrier();
          failure ??= 'the next barrier succeeded';
        } catch (error) {
          if (!(error instanceof CollectiveError) || error.code !== 'aborted')
            failure ??= `the next barrier failed with ${String(error)}`;
        }
      }
    } catch (error) {
      failure = String(error);
    }
    await world.barrier();
    await group.destroy();
    const after = allocateShared(Float32Array, 4).fill(1);
    await world.allReduce(after);
    if (after[0] !== size) failure ??= `the world all-reduce afterwards gave ${after[0]}, expected ${size}`;
    outcomes.push({ name, ...(failure === undefined ? {} : { failure: `rank ${rank}: ${failure}` }) });
  }
  return outcomes;
}
