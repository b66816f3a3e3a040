import { readFileSync } from 'node:fs';
import { allocateShared, type CollectiveBuffer, type ProcessGroup, type Work } from '../src/index.js';
import { median } from './internal/median.js';

export type BenchOp = 'allReduce' | 'allGather' | 'reduceScatter' | 'broadcast';

/** float32, bfloat16 buffers, or float32 buffers sent as bfloat16 (`f32/bf16-wire`). */
export type BenchVariant = 'float32' | 'bfloat16' | 'f32/bf16-wire';

export interface SweepConfig {
  ops: BenchOp[];
  variants: BenchVariant[];
  /** Full-buffer bytes (nccl-tests "size"), counted in float32 for the bf16-wire variant. */
  sizes: number[];
  iterations: number;
  warmup: number;
  /**
   * Where the buffers live, each placement measured right after the other for every op and size:
   * 'arena' = allocateShared(..., { arena: true }) (shm reduces in place, [Note: shm arena]),
   * 'plain' = an ordinary SharedArrayBuffer. Default ['plain'].
   */
  placements?: Placement[];
}

export type Placement = 'arena' | 'plain';

export interface SweepRow {
  op: BenchOp;
  variant: BenchVariant;
  placement: Placement;
  worldSize: number;
  bytes: number;
  /** Milliseconds per op: median, min, max over `iterations`. */
  medianMs: number;
  minMs: number;
  maxMs: number;
  /** Bus bandwidth (nccl-tests convention) in GB/s from the median, min and max times. */
  busbw: number;
  busbwBest: number;
  busbwWorst: number;
  /**
   * CPU milliseconds per op spent by this rank's threads other than the main thread (the
   * communication worker, plus V8's helper threads), and that as a share of the op's wall time;
   * the main thread waits in Atomics.wait meanwhile. tcp only (shm ranks share one process);
   * undefined where /proc is unavailable.
   */
  workerCpuMs?: number;
  workerCpuShare?: number;
  /** CPU milliseconds per op of this rank's whole process (every thread, barriers included; tcp only). */
  processCpuMs?: number;
}

/** CPU milliseconds of the calling thread (Linux /proc, 10 ms ticks), or undefined elsewhere. */
function threadCpuMs(): number | undefined {
  try {
    const fields = readFileSync('/proc/thread-self/stat', 'utf8').split(') ')[1]!.split(' ');
    // Fields 14 and 15 of stat (utime, stime), counted after the ") " that ends the name.
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

function processCpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

/** nccl-tests: all-reduce x 2(n-1)/n, all-gather and reduce-scatter x (n-1)/n, broadcast x 1. */
export function busFactor(op: BenchOp, size: number): number {
  if (size === 1) return 1;
  if (op === 'allReduce') return (2 * (size - 1)) / size;
  if (op === 'broadcast') return 1;
  return (size - 1) / size;
}

function allocate(variant: BenchVariant, elements: number, placement: Placement): CollectiveBuffer {
  const options = { arena: placement === 'arena' };
  const buffer =
    variant === 'bfloat16'
      ? allocateShared(Uint16Array, elements, options)
      : allocateShared(Float32Array, elements, options);
  if (buffer instanceof Float32Array) for (let i = 0; i < elements; i++) buffer[i] = (i % 13) - 6;
  else buffer.fill(0x3f80);
  return buffer;
}

/** Runs the sweep on this rank (every rank calls it); returns the rows as measured here. */
export function runSweep(group: ProcessGroup, config: SweepConfig): SweepRow[] {
  const rows: SweepRow[] = [];
  const size = group.size;
  for (const op of config.ops) {
    for (const variant of config.variants) {
      const elementBytes = variant === 'bfloat16' ? 2 : 4;
      const options = {
        ...(variant === 'bfloat16' ? { dtype: 'bfloat16' as const } : {}),
        ...(variant === 'f32/bf16-wire' ? { wireDtype: 'bfloat16' as const } : {}),
      };
      for (const bytes of config.sizes)
        for (const placement of config.placements ?? ['plain']) {
          const total = Math.floor(bytes / elementBytes / size) * size;
          const shard = total / size;
          let issue: () => Work;
          if (op === 'allReduce' || op === 'broadcast') {
            const buffer = allocate(variant, total, placement);
            issue =
              op === 'allReduce'
                ? () => group.allReduce(buffer, options)
                : () => group.broadcast(buffer, options);
          } else if (op === 'allGather') {
            const input = allocate(variant, shard, placement);
            const output = allocate(variant, total, placement);
            issue = () => group.allGather(output, input, options);
          } else {
            const input = allocate(variant, total, placement);
            const output = allocate(variant, shard, placement);
            issue = () => group.reduceScatter(output, input, options);
          }
          const times: number[] = [];
          let cpuStart = { process: 0, main: undefined as number | undefined };
          for (let iteration = 0; iteration < config.warmup + config.iterations; iteration++) {
            group.barrier().wait();
            if (iteration === config.warmup) cpuStart = { process: processCpuMs(), main: threadCpuMs() };
            const start = performance.now();
            issue().wait();
            const elapsed = performance.now() - start;
            if (iteration >= config.warmup) times.push(elapsed);
          }
          const mainEnd = threadCpuMs();
          // Barriers between timed ops are counted too: they cost the worker little CPU.
          // Only a tcp rank is a process of its own; shm ranks share one process.
          const workerCpuMs =
            group.backend !== 'tcp' || mainEnd === undefined || cpuStart.main === undefined
              ? undefined
              : (processCpuMs() - cpuStart.process - (mainEnd - cpuStart.main)) / config.iterations;
          const factor = busFactor(op, size);
          const measuredBytes = total * elementBytes;
          const gbps = (ms: number) => (measuredBytes / (ms / 1000) / 1e9) * factor;
          const medianMs = median(times);
          const minMs = Math.min(...times);
          const maxMs = Math.max(...times);
          rows.push({
            op,
            variant,
            placement,
            worldSize: size,
            bytes: measuredBytes,
            medianMs,
            minMs,
            maxMs,
            busbw: gbps(medianMs),
            busbwBest: gbps(minMs),
            busbwWorst: gbps(maxMs),
            ...(workerCpuMs === undefined
              ? {}
              : {
                  workerCpuMs,
                  processCpuMs: (processCpuMs() - cpuStart.process) / config.iterations,
                  workerCpuShare: workerCpuMs / (times.reduce((a, b) => a + b, 0) / times.length),
                }),
          });
        }
    }
  }
  return rows;
}
