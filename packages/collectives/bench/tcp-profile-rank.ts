/**
 * A rank of `bench/tcp-profile.ts`: float32 all-reduces of FSDP_PROFILE_BYTES, a barrier before
 * each; rank 0 prints `RESULT {medianMs, processCpuMs}` (process CPU per op, all threads). Run
 * with FSDP_TCP_PROFILE=1 for the worker's per-phase totals on stderr ([Note: native profile]).
 */
import { allocateShared, initProcessGroup } from '../src/index.js';
import { median } from './internal/median.js';

const bytes = Number(process.env.FSDP_PROFILE_BYTES ?? 16 << 20);
const iterations = Number(process.env.FSDP_PROFILE_ITERATIONS ?? 10);
const group = await initProcessGroup({ backend: 'tcp', timeoutMs: 120_000 });
try {
  const buffer = allocateShared(Float32Array, Math.floor(bytes / 4 / group.size) * group.size);
  for (let index = 0; index < buffer.length; index++) buffer[index] = (index % 13) - 6;
  const times: number[] = [];
  let cpuStart = 0;
  let userStart = 0;
  let systemStart = 0;
  for (let iteration = 0; iteration < iterations + 2; iteration++) {
    group.barrier().wait();
    if (iteration === 2) {
      const usage = process.cpuUsage();
      cpuStart = usage.user + usage.system;
      userStart = usage.user;
      systemStart = usage.system;
    }
    const start = performance.now();
    group.allReduce(buffer).wait();
    if (iteration >= 2) times.push(performance.now() - start);
  }
  const usage = process.cpuUsage();
  const processCpuMs = (usage.user + usage.system - cpuStart) / 1000 / iterations;
  if (group.rank === 0)
    process.stdout.write(
      `RESULT ${JSON.stringify({ medianMs: median(times), minMs: Math.min(...times), processCpuMs, user: (usage.user - userStart) / 1000 / iterations, system: (usage.system - systemStart) / 1000 / iterations })}\n`,
    );
} finally {
  await group.destroy();
}
