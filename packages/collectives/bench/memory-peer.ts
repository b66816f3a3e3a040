/**
 * The hardware's peer for the shm backend, measured in the benchmark's own run: how fast one
 * thread copies 16 MiB with TypedArray.set (memcpy), alone and with a second thread copying its
 * own 16 MiB at the same moment (as both shm ranks do during an op). An shm op can move its
 * bytes no faster than these copies; `shmCeiling` turns the two-thread rate into the bus
 * bandwidth each op would reach if it did nothing but move its bytes (see
 * architecture/performance.md, "shm: in place and the arena").
 */
import { allocateShared, spawnThreadRanks, type ThreadRankArguments } from '../src/index.js';
import { segmentBounds } from '../src/internal/aliasing.js';
import { reduceInArena } from '../src/internal/shm/in-place-reduce.js';
import { reserve, type SharedMemory } from '../src/internal/shm/shm-arena.js';
import { pushGather } from '../src/internal/shm/shm-engine.js';
import { reduceShared } from '../src/internal/shm/shm-reduce.js';
import { threadRankContext } from '../src/internal/shm/thread-rank-context.js';
import { median } from './internal/median.js';
import type { BenchOp, Form, Placement } from './sweep.js';

const ELEMENTS = 4 << 20; // 16 MiB of float32
const ROUNDS = 15;
const WARMUP = 3;
/**
 * 32 MiB written by each thread of a data floor before each round: together they evict the
 * 32 MiB last-level cache, so a round starts with its buffers in memory, as an op of the sweep
 * does (its cases alternate over buffers far larger than the cache). Without it, the same op
 * repeated on 32 MiB of buffers runs from the cache, two to three times faster than any op.
 */
const EVICT_ELEMENTS = 8 << 20;

export interface CopyPeer {
  /** GB/s of bytes copied (each read once and written once), median [min .. max]. */
  median: number;
  best: number;
  worst: number;
}

interface CopyArguments {
  /** [0] barrier counter, [1] rounds finished. */
  control: Int32Array;
  threads: number;
  /** 'copy' (default): Float32Array.set of 16 MiB; 'fill': Float32Array.fill of 16 MiB (writes only). */
  mode?: 'copy' | 'fill';
}

function summarise(rates: number[]): CopyPeer {
  const sorted = [...rates].sort((a, b) => a - b);
  return { median: median(sorted), best: sorted.at(-1)!, worst: sorted[0]! };
}

function sharedFloats(elements: number): Float32Array {
  return new Float32Array(new SharedArrayBuffer(elements * 4));
}

/** A copying thread: ROUNDS copies of 16 MiB, each started together with the other threads. */
export function copyRank({ args }: ThreadRankArguments<CopyArguments>): number[] {
  const { control, threads } = args;
  const source = sharedFloats(ELEMENTS).fill(1.5);
  const target = sharedFloats(ELEMENTS).fill(0);
  const ms: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    barrier(control, threads, round);
    const start = performance.now();
    if (args.mode === 'fill') target.fill(round);
    else target.set(source);
    ms.push(performance.now() - start);
  }
  return ms;
}

/**
 * An in-place reducing thread: ROUNDS times, started together with the other threads, the part
 * one rank computes of a 16 MiB float32 sum all-reduce over arena buffers at world size
 * `threads` (its 1/n slice of n buffers, reduced and written back into all of them, with the shm
 * engine's own kernels), with no message, wake-up or finish phase, its buffers out of the cache
 * first (EVICT_ELEMENTS): the data floor of the op.
 */
export function inPlaceRank({ args }: ThreadRankArguments<CopyArguments>): number[] {
  const { control, threads } = args;
  const arena = threadRankContext()?.arena ?? null;
  const slices = Array.from({ length: threads }, (_, index) =>
    allocateShared(Float32Array, ELEMENTS / threads, { arena: true }).fill(index + 1),
  );
  const evict = sharedFloats(EVICT_ELEMENTS);
  const ms: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    evict.fill(round);
    barrier(control, threads, round);
    const start = performance.now();
    if (arena === null || !reduceInArena(slices, slices, 'float32', 'sum', threads, arena))
      throw new Error('the in-place floor needs the arena and its SIMD kernels');
    ms.push(performance.now() - start);
  }
  return ms;
}

/** Every thread arrives, the last one wakes the others. */
function barrier(control: Int32Array, threads: number, round: number): void {
  const goal = threads * (round + 1);
  if (Atomics.add(control, 0, 1) + 1 === goal) Atomics.notify(control, 0);
  else
    for (let seen = Atomics.load(control, 0); seen < goal; seen = Atomics.load(control, 0))
      Atomics.wait(control, 0, seen, 1_000);
}

/**
 * Milliseconds per round (median [min .. max] of the slowest thread) of `threads` threads each
 * doing its part of a 16 MiB in-place all-reduce at once (inPlaceRank).
 */
export async function measureInPlaceFloor(threads: number): Promise<InPlaceFloor> {
  const control = new Int32Array(new SharedArrayBuffer(8));
  const perThread = (await spawnThreadRanks(threads, new URL(import.meta.url), 'inPlaceRank', {
    args: { control, threads } satisfies CopyArguments,
    timeoutMs: 120_000,
  })) as number[][];
  const ms: number[] = [];
  for (let round = WARMUP; round < ROUNDS; round++)
    ms.push(Math.max(...perThread.map((times) => times[round]!)));
  const sorted = [...ms].sort((a, b) => a - b);
  return { medianMs: median(sorted), bestMs: sorted[0]!, worstMs: sorted.at(-1)! };
}

export interface InPlaceFloor {
  medianMs: number;
  bestMs: number;
  worstMs: number;
}

/**
 * Copy rate of `threads` threads copying 16 MiB each at once (per thread, from the slowest); with
 * `mode` 'fill', the rate at which each fills 16 MiB (bytes written, none read: with
 * write-allocate caches each written line is fetched first, so a fill costs about a copy).
 */
export async function measureCopyPeer(threads: number, mode: 'copy' | 'fill' = 'copy'): Promise<CopyPeer> {
  const control = new Int32Array(new SharedArrayBuffer(8));
  const perThread = (await spawnThreadRanks(threads, new URL(import.meta.url), 'copyRank', {
    args: { control, threads, mode } satisfies CopyArguments,
    timeoutMs: 120_000,
  })) as number[][];
  const rates: number[] = [];
  for (let round = WARMUP; round < ROUNDS; round++) {
    const slowest = Math.max(...perThread.map((times) => times[round]!));
    rates.push((ELEMENTS * 4) / (slowest / 1000) / 1e9);
  }
  return summarise(rates);
}

/**
 * Bus bandwidth an shm op reaches at world size `size` if each rank only moves its bytes at
 * `copyRate` (GB/s copied by each of the threads working at once; a copy reads and writes each
 * byte once). Per rank, for a full buffer of S bytes:
 *   all-reduce          reads S (its slice of every rank), writes S (its slice into every rank): time S / rate
 *   all-gather          reads S / n (its input, once per block), writes S (into every output)
 *   all-gather in place reads S / n, writes S (n - 1) / n (its own block is already there): time S / (2 rate)
 *   reduce-scatter      reads S (its slice of every input), writes S / n (out of place or in place)
 *   broadcast           one rank reads S and writes S (the others wait): time S / rate
 * with reads and writes counted as half a copied byte each; then the nccl-tests bus factor.
 * This counts a written byte as half a copy; with write-allocate caches a write to a line not
 * yet cached fetches it first, and the measured data floors (measureDataFloor) are the real
 * bound: the benchmark prints both.
 */
export function shmCeiling(op: BenchOp, size: number, copyRate: number, form: Form = 'out-of-place'): number {
  if (op === 'allReduce') return (copyRate * 2 * (size - 1)) / size;
  if (op === 'broadcast') return copyRate;
  // (S/n + S(n-1)/n) / 2 = S/2 copied bytes in S / (2 rate) seconds, times (n - 1) / n.
  if (op === 'allGather' && form === 'in-place') return (2 * copyRate * (size - 1)) / size;
  // (S + S/n) / 2 copied bytes in S(1 + 1/n) / (2 rate) seconds, times (n - 1) / n.
  return (2 * copyRate * (size - 1)) / (size + 1);
}

/** An op's data work, as a data floor measures it (see measureDataFloor). */
export interface FloorCase {
  op: 'allReduce' | 'allGather' | 'reduceScatter';
  form: Form;
  placement: Placement;
}

interface FloorArguments extends FloorCase {
  /** [0] barrier counter; from [2], two arena addresses per rank (whole, part), set by rank 0. */
  control: Int32Array;
  threads: number;
  /** placement 'plain': every rank's whole and part buffers, made by the spawning thread. */
  plain: SharedArrayBuffer[];
}

/** Elements of an op's full buffer at world size `threads`: 16 MiB of float32, a multiple of `threads`. */
function floorElements(threads: number): number {
  return Math.floor(ELEMENTS / threads) * threads;
}

/**
 * Rank `rank`'s buffers of a data floor: its whole buffer (all-reduce's buffer, all-gather's
 * output, reduce-scatter's input: S bytes) and its part (all-gather's input, reduce-scatter's
 * output: S/n), the part being the whole's block `rank` in place.
 */
function floorBuffers(
  args: FloorArguments,
  arena: SharedMemory | null,
  rank: number,
): { whole: Float32Array; part: Float32Array } {
  const elements = floorElements(args.threads);
  const count = elements / args.threads;
  let whole: Float32Array;
  let part: Float32Array;
  if (args.placement === 'arena') {
    const memory = arena!.buffer;
    whole = new Float32Array(memory, args.control[2 + 2 * rank]!, elements);
    part = new Float32Array(memory, args.control[3 + 2 * rank]!, count);
  } else {
    whole = new Float32Array(args.plain[2 * rank]!);
    part = new Float32Array(args.plain[2 * rank + 1]!);
  }
  if (args.form === 'in-place') part = whole.subarray(rank * count, (rank + 1) * count);
  return { whole, part };
}

/**
 * A thread of a data floor: ROUNDS times, started together with the other threads, the shm
 * engine's own data work for its rank of one 16 MiB float32 op (the same functions, the same
 * buffers shared between the threads as the op shares them), with no message, wake-up or finish
 * phase, its buffers out of the cache first (EVICT_ELEMENTS): what the op would cost if its
 * fixed cost were zero.
 */
export function floorRank({ rank, args }: ThreadRankArguments<FloorArguments>): number[] {
  const { control, threads, op } = args;
  const arena = threadRankContext()?.arena ?? null;
  const elements = floorElements(threads);
  const count = elements / threads;
  if (args.placement === 'arena') {
    if (arena === null) throw new Error("the arena floor needs the thread ranks' arena");
    if (rank === 0)
      for (let peer = 0; peer < threads; peer++) {
        control[2 + 2 * peer] = reserve(arena, elements * 4)!;
        control[3 + 2 * peer] = reserve(arena, count * 4)!;
      }
  }
  barrier(control, threads, 0);
  const buffers = Array.from({ length: threads }, (_, peer) => floorBuffers(args, arena, peer));
  const own = buffers[rank]!;
  own.whole.fill(rank + 1);
  if (args.form === 'out-of-place') own.part.fill(rank + 1);
  const reduceArena = args.placement === 'arena' ? arena : null;
  const evict = sharedFloats(EVICT_ELEMENTS);
  const ms: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    evict.fill(round);
    barrier(control, threads, round);
    const start = performance.now();
    if (op === 'allReduce') {
      const [first, last] = segmentBounds(rank, elements, threads);
      const views = buffers.map((buffer) => buffer.whole.subarray(first, last));
      reduceShared(views, views, 'float32', 'sum', threads, reduceArena);
    } else if (op === 'allGather') {
      const targets = buffers
        .filter((_, peer) => !(args.form === 'in-place' && peer === rank))
        .map((buffer) => buffer.whole);
      pushGather(own.part, targets, rank * count);
    } else {
      const sources = buffers.map((buffer) => buffer.whole.subarray(rank * count, (rank + 1) * count));
      reduceShared(sources, [own.part], 'float32', 'sum', threads, reduceArena);
    }
    ms.push(performance.now() - start);
  }
  return ms;
}

/**
 * Milliseconds per round (median [min .. max] of the slowest thread) of `threads` threads each
 * doing its rank's data work of a 16 MiB float32 op at once (floorRank): the op's floor.
 */
export async function measureDataFloor(threads: number, floor: FloorCase): Promise<InPlaceFloor> {
  const control = new Int32Array(new SharedArrayBuffer(4 * (2 + 2 * threads)));
  const elements = floorElements(threads);
  const plain =
    floor.placement === 'plain'
      ? Array.from({ length: threads }, () => [
          new SharedArrayBuffer(elements * 4),
          new SharedArrayBuffer((elements / threads) * 4),
        ]).flat()
      : [];
  const perThread = (await spawnThreadRanks(threads, new URL(import.meta.url), 'floorRank', {
    args: { control, threads, plain, ...floor } satisfies FloorArguments,
    timeoutMs: 120_000,
  })) as number[][];
  const ms: number[] = [];
  for (let round = WARMUP; round < ROUNDS; round++)
    ms.push(Math.max(...perThread.map((times) => times[round]!)));
  const sorted = [...ms].sort((a, b) => a - b);
  return { medianMs: median(sorted), bestMs: sorted[0]!, worstMs: sorted.at(-1)! };
}
