import { initProcessGroup, type ThreadRankArguments } from '../src/index.js';
import { measureSmallOps, type SmallOpRow } from './small-op.js';
import { runSweep, type SweepConfig, type SweepRow } from './sweep.js';

/** A thread rank of the shm benchmark: runs the sweep; rank 0's rows are the result. */
export async function shmBenchRank({ args }: ThreadRankArguments<SweepConfig>): Promise<SweepRow[]> {
  const group = await initProcessGroup({ timeoutMs: 120_000 });
  try {
    return runSweep(group, args);
  } finally {
    await group.destroy();
  }
}

/** A thread rank of the small-op latency benchmark: rank 0's rows are the result. */
export async function shmSmallOpRank({
  args,
}: ThreadRankArguments<{ opsPerBatch: number }>): Promise<SmallOpRow[]> {
  const group = await initProcessGroup({ timeoutMs: 120_000 });
  try {
    return await measureSmallOps(group, args.opsPerBatch);
  } finally {
    await group.destroy();
  }
}
