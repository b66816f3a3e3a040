/** A rank process of the tcp benchmark (under fsdp-run); rank 0 prints `RESULT <json>`. */
import { initProcessGroup } from '../src/index.js';
import { localLinkCounts } from '../src/internal/tcp/tcp-connections.js';
import { measureRawSocket } from './raw-socket.js';
import { measureSmallOps } from './small-op.js';
import { runSweep, type SweepConfig } from './sweep.js';

const config = JSON.parse(process.env.FSDP_BENCH_CONFIG ?? '{}') as SweepConfig;
const group = await initProcessGroup({ backend: 'tcp', timeoutMs: 120_000 });
try {
  const smallOps = process.env.FSDP_BENCH_SMALL_OPS;
  if (smallOps !== undefined) {
    const rows = await measureSmallOps(group, Number(smallOps));
    if (group.rank === 0) process.stdout.write(`RESULT ${JSON.stringify({ rows })}\n`);
  } else {
    const rawSocket =
      group.size === 2 ? await measureRawSocket(group, 16 << 20, config.iterations) : undefined;
    const rows = runSweep(group, config);
    // Which transport rank 0's connections took ([Note: local peer sockets]).
    if (group.rank === 0)
      process.stdout.write(`RESULT ${JSON.stringify({ rows, rawSocket, links: localLinkCounts() })}\n`);
  }
} finally {
  await group.destroy();
}
