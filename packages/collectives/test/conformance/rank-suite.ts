import { allocateShared, CollectiveError, type ProcessGroup } from '../../src/index.js';
import { abortOutcomes, failureAgreementOutcomes } from './abort.js';
import { conformanceCases } from './cases.js';
import { type CaseOutcome, runConformance } from './run-conformance.js';
import { subgroupOutcomes } from './subgroups.js';

/** How one backend runs the suite (see launchers.ts). */
export interface SuiteOptions {
  /** Include the large cases (they take seconds): chosen per backend and world size. */
  readonly huge: boolean;
  /** The backend has a wire: run the bfloat16-on-the-wire cases too. */
  readonly wire: boolean;
}

/**
 * What every rank of every backend runs: every op × dtype × size against the reference, the
 * sub-group cases (at world size 4), the abort and failure-agreement cases, and a mismatched op, which must fail on
 * every rank with code 'mismatch' and leave the group usable (the engine base's header check).
 */
export async function rankConformance(group: ProcessGroup, options: SuiteOptions): Promise<CaseOutcome[]> {
  const { size, rank } = group;
  const outcomes = await runConformance(group, conformanceCases(size, options));
  if (size === 4) outcomes.push(...(await subgroupOutcomes(group)));
  if (size > 1) outcomes.push(mismatchThenRecovery(group, rank, size));
  if (size > 1) outcomes.push(...(await abortOutcomes(group)));
  if (size > 1) outcomes.push(...(await failureAgreementOutcomes(group)));
  return outcomes;
}

function mismatchThenRecovery(group: ProcessGroup, rank: number, size: number): CaseOutcome {
  let failure: string | undefined = 'the mismatched all-reduce succeeded';
  try {
    group.allReduce(allocateShared(Float32Array, rank === 0 ? 8 : 9)).wait();
  } catch (error) {
    failure =
      error instanceof CollectiveError && error.code === 'mismatch'
        ? undefined
        : `expected a mismatch error, got ${String(error)}`;
  }
  const after = allocateShared(Float32Array, 4).fill(1);
  group.allReduce(after).wait();
  if (after[0] !== size) failure ??= `the next all-reduce gave ${after[0]}, expected ${size}`;
  return { name: 'mismatch then recovery', ...(failure === undefined ? {} : { failure }) };
}
