/**
 * A rank of the tcp profile (run through fsdp-run): float32
 * all-reduces of FSDP_PROFILE_BYTES, FSDP_PROFILE_ITERATIONS timed after FSDP_PROFILE_WARMUP (2), a barrier
 * before each unless FSDP_PROFILE_BARRIER=0 (then back to back). Rank 0 prints `RESULT
 * {medianMs, processCpuMs, ...}` (process CPU per op, all threads, barriers included) and every
 * rank `THREADS {...}`: per op, CPU ms and voluntary (blocking wake-ups) / involuntary context
 * switches of its main thread, its communication worker (the busiest other thread) and the rest,
 * from /proc/self/task. For the worker's phases, run the ranks with `node --cpu-prof`.
 */
import { allocateShared, initProcessGroup } from '../src/index.js';
import { median } from './internal/median.js';
import { perOpByRole, readThreadCounters } from './internal/thread-counters.js';

const bytes = Number(process.env.FSDP_PROFILE_BYTES ?? 16 << 20);
const iterations = Number(process.env.FSDP_PROFILE_ITERATIONS ?? 10);
const barrier = process.env.FSDP_PROFILE_BARRIER !== '0';
const warmup = Number(process.env.FSDP_PROFILE_WARMUP ?? 2);
const group = await initProcessGroup({ backend: 'tcp', timeoutMs: 120_000 });
try {
  const buffer = allocateShared(Float32Array, Math.floor(bytes / 4 / group.size) * group.size);
  for (let index = 0; index < buffer.length; index++) buffer[index] = (index % 13) - 6;
  const times: number[] = [];
  let cpuStart = 0;
  let userStart = 0;
  let systemStart = 0;
  let threadsStart = readThreadCounters();
  for (let iteration = 0; iteration < iterations + warmup; iteration++) {
    if (barrier) group.barrier().wait();
    if (iteration === warmup) {
      const usage = process.cpuUsage();
      cpuStart = usage.user + usage.system;
      userStart = usage.user;
      systemStart = usage.system;
      threadsStart = readThreadCounters();
    }
    const start = performance.now();
    group.allReduce(buffer).wait();
    if (iteration >= warmup) times.push(performance.now() - start);
  }
  const threads = perOpByRole(threadsStart, readThreadCounters(), iterations);
  const usage = process.cpuUsage();
  const processCpuMs = (usage.user + usage.system - cpuStart) / 1000 / iterations;
  if (group.rank === 0)
    process.stdout.write(
      `RESULT ${JSON.stringify({ medianMs: median(times), meanMs: times.reduce((sum, time) => sum + time, 0) / times.length, minMs: Math.min(...times), processCpuMs, user: (usage.user - userStart) / 1000 / iterations, system: (usage.system - systemStart) / 1000 / iterations })}\n`,
    );
  const round = (value: number) => Math.round(value * 100) / 100;
  const rounded = Object.fromEntries(
    Object.entries(threads).map(([role, counts]) => [
      role,
      {
        cpuMs: round(counts.cpuMs),
        voluntary: round(counts.voluntary),
        involuntary: round(counts.involuntary),
      },
    ]),
  );
  process.stdout.write(`THREADS ${JSON.stringify(rounded)}\n`);
} finally {
  await group.destroy();
}
