import { createMemoryCaps } from './memory-cap.js';
import type { AttemptDirectory } from './run-directory.js';
import { logPeakMemory, type WorkerExit, WorkerProcess } from './worker-process.js';

/**
 * [Note: failure settle] After the first worker of an attempt fails, fsdp-run gives the others
 * up to this long to end on their own before it stops them, so that ranks failing at the same
 * step (or as a consequence, within milliseconds) each record their own failure for the report
 * ([Note: one report per job]) instead of being cut short by SIGTERM.
 */
export const FAILURE_SETTLE_MS = 1_000;

export interface LocalWorkersPlan {
  /** How many workers this node starts (--nproc-per-node). */
  count: number;
  /** The global rank of local rank 0; local rank i is rank `firstRank + i`. */
  firstRank: number;
  /** --memory-per-rank in bytes, or undefined for no caps. */
  memoryPerRankBytes: number | undefined;
  /** Names this attempt's or round's cgroups: `<cgroupLabel>-rank-<rank>`. */
  cgroupLabel: string;
  /** The environment and node arguments of one worker. */
  environmentOf(rank: number, localRank: number): { env: NodeJS.ProcessEnv; nodeArguments: string[] };
  /** Where the launcher's own lines go (the per-worker peak memory line at exit). */
  log(message: string): void;
  /** Where each worker writes its failure record and log ([Note: failure records]). */
  records: AttemptDirectory;
}

/**
 * Starts one node's workers for one attempt (fixed-size jobs) or round (elastic jobs), each in its
 * own memory cgroup when capped, with FSDP_MEMORY_LIMIT_BYTES telling the worker its cap
 * ([Note: per-rank memory caps]). Every cgroup exists before any worker starts, so a failure to
 * create one leaves no worker behind. Each worker logs its peak memory against its cap at exit.
 */
export function startLocalWorkers(plan: LocalWorkersPlan): WorkerProcess[] {
  const ranks = Array.from({ length: plan.count }, (_, localRank) => plan.firstRank + localRank);
  const memoryCaps = createMemoryCaps(plan.memoryPerRankBytes, ranks, plan.cgroupLabel);
  const workers = ranks.map((rank, localRank) => {
    const environment = plan.environmentOf(rank, localRank);
    Object.assign(environment.env, plan.records.environmentOf(rank));
    const memoryCap = memoryCaps[localRank];
    if (memoryCap !== undefined) environment.env.FSDP_MEMORY_LIMIT_BYTES = String(memoryCap.limitBytes);
    return new WorkerProcess({
      rank,
      localRank,
      nodeArguments: environment.nodeArguments,
      env: environment.env,
      ...(memoryCap === undefined ? {} : { memoryCap }),
    });
  });
  logPeakMemory(workers, plan.log);
  return workers;
}

/** Resolves when every worker has exited, or after `withinMs`, whichever is first ([Note: failure settle]). */
export async function settleWorkers(
  workers: readonly WorkerProcess[],
  withinMs = FAILURE_SETTLE_MS,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(workers.map((worker) => worker.exited)),
    new Promise((resolve) => (timer = setTimeout(resolve, withinMs))),
  ]);
  clearTimeout(timer);
}

/** Every worker's exit (call once they have all exited). */
export function exitsOf(workers: readonly WorkerProcess[]): Promise<WorkerExit[]> {
  return Promise.all(workers.map((worker) => worker.exited));
}
