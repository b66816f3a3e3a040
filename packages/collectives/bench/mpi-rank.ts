/** A rank process of the mpi benchmark (under mpirun: the mpi backend by default); rank 0 prints `RESULT <json>`. */
import { initProcessGroup } from '../src/index.js';
import { runSweep, type SweepConfig } from './sweep.js';

const config = JSON.parse(process.env.FSDP_BENCH_CONFIG ?? '{}') as SweepConfig;
const group = await initProcessGroup({ timeoutMs: 120_000 });
try {
  const rows = runSweep(group, config);
  if (group.rank === 0) process.stdout.write(`RESULT ${JSON.stringify({ backend: group.backend, rows })}\n`);
} finally {
  await group.destroy();
}
