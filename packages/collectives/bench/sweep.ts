import { readFileSync } from 'node:fs';
import { allocateShared, type CollectiveBuffer, type ProcessGroup, type Work } from '../src/index.js';
import { loadNativeSockets, resolveNativeSocketsModule } from '../src/internal/tcp/native-sockets.js';
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
   * Untimed ops per case are at least `warmupBytes / size` as well as `warmup` ([Note: warm-up by
   * volume]). Default 0: `warmup` alone.
   */
  warmupBytes?: number;
  /** Timed ops per case are at least `timedBytes / size` as well as `iterations`. Default 0. */
  timedBytes?: number;
  /**
   * Where the buffers live, each placement measured right after the other for every op and size:
   * 'arena' = allocateShared(..., { arena: true }) (shm reduces in place, [Note: shm arena]),
   * 'plain' = an ordinary SharedArrayBuffer. Default ['plain'].
   */
  placements?: Placement[];
  /**
   * all-gather and reduce-scatter only: 'out-of-place' (separate input and output) and/or
   * 'in-place' (the input is the rank's block of the output, or the output the rank's block of
   * the input: nccl-tests' in-place columns), measured interleaved with each other like the
   * placements. Default ['out-of-place']; the other ops are always out of place.
   */
  forms?: Form[];
}

export type Placement = 'arena' | 'plain';
export type Form = 'out-of-place' | 'in-place';

export interface SweepRow {
  op: BenchOp;
  variant: BenchVariant;
  placement: Placement;
  form: Form;
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

/**
 * CPU milliseconds of the calling thread: clock_gettime(CLOCK_THREAD_CPUTIME_ID) through koffi
 * where the native tcp path loads (nanoseconds), else Linux /proc (10 ms ticks), else undefined.
 */
function nativeThreadClock(): () => number | undefined {
  const sockets = loadNativeSockets(resolveNativeSocketsModule());
  return sockets === undefined ? threadCpuMs : () => sockets.threadCpuMs();
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

/** One measured case of a sweep: an op on buffers of one variant, size and placement. */
interface SweepCase {
  variant: BenchVariant;
  placement: Placement;
  form: Form;
  /** Bytes of the full buffer in its own element type. */
  bytes: number;
  issue: () => Work;
  times: number[];
  processCpuMs: number;
  mainCpuMs: number | undefined;
}

const OUT_OF_PLACE: readonly Form[] = ['out-of-place'];

/**
 * [Note: warm-up by volume] A fresh Node process runs its first ops while V8 still compiles the
 * data path's loops: at 1 MiB, W=3, ops 6-20 of a fresh tcp group took 2.4-2.8 ms of CPU and the
 * same ops after 2000 warm-ups 1.2-2.0 (architecture/performance.md, tcp against gloo). A training run
 * issues thousands of ops, so the steady state is what a comparison with compiled gloo should
 * time. Warm-ups are counted in bytes moved (`warmupBytes / size` ops, at least `warmup`), and
 * so are timed ops (`timedBytes / size`, at least `iterations`: a 1 MiB op lasts ~1 ms, and 15
 * of them give a median one scheduling hiccup can move), the same rule on both sides of a
 * comparison (gloo-all-reduce.py's WARMUP_BYTES and TIMED_BYTES). Every rank computes the same
 * counts from the config, so the ranks issue the same ops.
 */
export function opsByVolume(minimum: number, totalBytes: number, bytes: number): number {
  return Math.max(minimum, bytes > 0 ? Math.ceil(totalBytes / bytes) : 0);
}

/** Ops per case in each interleaved block (see [Note: interleaved sweep]). */
const OPS_PER_BLOCK = 2;

/**
 * [Note: interleaved sweep] Every case of one op and size (each variant, each placement) is
 * measured in blocks of OPS_PER_BLOCK ops taken in turn, A B C A B C ..., until each has
 * `iterations` timed ops, after `warmup` untimed ones each: a ratio between two variants (bf16
 * wire / float32, arena / plain) then compares neighbours in time throughout, so one noisy
 * minute weighs on both sides alike. CPU is counted per block, the main thread's through a
 * nanosecond clock where koffi loads (/proc's 10 ms ticks otherwise, which only suit long blocks).
 */
export function runSweep(group: ProcessGroup, config: SweepConfig): SweepRow[] {
  const rows: SweepRow[] = [];
  const size = group.size;
  const threadClock = nativeThreadClock();
  for (const op of config.ops) {
    for (const bytes of config.sizes) {
      const forms =
        op === 'allGather' || op === 'reduceScatter' ? (config.forms ?? OUT_OF_PLACE) : OUT_OF_PLACE;
      const cases = config.variants.flatMap((variant) =>
        (config.placements ?? ['plain']).flatMap((placement) =>
          forms.map((form) => sweepCase(group, op, variant, bytes, placement, form)),
        ),
      );
      const warmups = opsByVolume(config.warmup, config.warmupBytes ?? 0, bytes);
      const timed = opsByVolume(config.iterations, config.timedBytes ?? 0, bytes);
      for (const measured of cases)
        for (let iteration = 0; iteration < warmups; iteration++) {
          group.barrier().wait();
          measured.issue().wait();
        }
      for (let done = 0; done < timed; done += OPS_PER_BLOCK) {
        const count = Math.min(OPS_PER_BLOCK, timed - done);
        for (const measured of cases) {
          const processStart = processCpuMs();
          const mainStart = threadClock();
          for (let iteration = 0; iteration < count; iteration++) {
            // Barriers between timed ops are counted in the CPU too: they cost the worker little.
            group.barrier().wait();
            const start = performance.now();
            measured.issue().wait();
            measured.times.push(performance.now() - start);
          }
          const mainEnd = threadClock();
          measured.processCpuMs += processCpuMs() - processStart;
          measured.mainCpuMs =
            measured.mainCpuMs === undefined || mainStart === undefined || mainEnd === undefined
              ? undefined
              : measured.mainCpuMs + (mainEnd - mainStart);
        }
      }
      for (const measured of cases) rows.push(sweepRow(group, op, measured, timed));
    }
  }
  // Rows in the order the tables read them: by op, variant, size, placement, then form.
  const order = (row: SweepRow) => [
    config.ops.indexOf(row.op),
    config.variants.indexOf(row.variant),
    config.sizes.findIndex((bytes) => caseBytes(row.variant, bytes, size) === row.bytes),
    (config.placements ?? ['plain']).indexOf(row.placement),
    row.form === 'in-place' ? 1 : 0,
  ];
  return rows.sort((a, b) => {
    const [left, right] = [order(a), order(b)];
    for (let index = 0; index < left.length; index++)
      if (left[index] !== right[index]) return left[index]! - right[index]!;
    return 0;
  });
}

/** Bytes a case of `bytes` measures: rounded down to a multiple of the world size in elements. */
function caseBytes(variant: BenchVariant, bytes: number, worldSize: number): number {
  const elementBytes = variant === 'bfloat16' ? 2 : 4;
  return Math.floor(bytes / elementBytes / worldSize) * worldSize * elementBytes;
}

function sweepCase(
  group: ProcessGroup,
  op: BenchOp,
  variant: BenchVariant,
  bytes: number,
  placement: Placement,
  form: Form,
): SweepCase {
  const elementBytes = variant === 'bfloat16' ? 2 : 4;
  const total = caseBytes(variant, bytes, group.size) / elementBytes;
  const shard = total / group.size;
  const options = {
    ...(variant === 'bfloat16' ? { dtype: 'bfloat16' as const } : {}),
    ...(variant === 'f32/bf16-wire' ? { wireDtype: 'bfloat16' as const } : {}),
  };
  let issue: () => Work;
  if (op === 'allReduce' || op === 'broadcast') {
    const buffer = allocate(variant, total, placement);
    issue =
      op === 'allReduce' ? () => group.allReduce(buffer, options) : () => group.broadcast(buffer, options);
  } else if (op === 'allGather') {
    const output = allocate(variant, total, placement);
    const own = output.subarray(group.rank * shard, (group.rank + 1) * shard);
    const input = form === 'in-place' ? own : allocate(variant, shard, placement);
    issue = () => group.allGather(output, input, options);
  } else {
    const input = allocate(variant, total, placement);
    const own = input.subarray(group.rank * shard, (group.rank + 1) * shard);
    const output = form === 'in-place' ? own : allocate(variant, shard, placement);
    issue = () => group.reduceScatter(output, input, options);
  }
  return {
    variant,
    placement,
    form,
    bytes: total * elementBytes,
    issue,
    times: [],
    processCpuMs: 0,
    mainCpuMs: 0,
  };
}

function sweepRow(group: ProcessGroup, op: BenchOp, measured: SweepCase, iterations: number): SweepRow {
  const { times } = measured;
  const factor = busFactor(op, group.size);
  const gbps = (ms: number) => (measured.bytes / (ms / 1000) / 1e9) * factor;
  const medianMs = median(times);
  const minMs = Math.min(...times);
  const maxMs = Math.max(...times);
  // Only a tcp rank is a process of its own; shm ranks share one process.
  const workerCpuMs =
    group.backend !== 'tcp' || measured.mainCpuMs === undefined
      ? undefined
      : (measured.processCpuMs - measured.mainCpuMs) / iterations;
  return {
    op,
    variant: measured.variant,
    placement: measured.placement,
    form: measured.form,
    worldSize: group.size,
    bytes: measured.bytes,
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
          processCpuMs: measured.processCpuMs / iterations,
          workerCpuShare: workerCpuMs / (times.reduce((a, b) => a + b, 0) / times.length),
        }),
  };
}
