/**
 * `node --conditions=@fsdp-ts/source --import tsx bench/shm-profile.ts`: a 16 MiB float32 shm op
 * at W=2, case by case. Each rank runs all-reduce, all-gather and reduce-scatter (out of place and
 * in place) on arena buffers, the cases interleaved op by op (ABAB), a barrier before each; rank 0
 * prints the median wall time per op as its main thread sees it. For where the communication
 * worker's time goes, add `--cpu-prof` to the run (the worker writes its own profile). Options:
 * FSDP_PROFILE_OPS (default 30), FSDP_PROFILE_PLACEMENT=plain for ordinary SharedArrayBuffers.
 */
import { isMainThread } from 'node:worker_threads';
import {
  allocateShared,
  initProcessGroup,
  spawnThreadRanks,
  type ThreadRankArguments,
  type Work,
} from '../src/index.js';
import { median } from './internal/median.js';

const ELEMENTS = 4 << 20;
const WARMUP = 3;

interface ProfileCase {
  name: string;
  issue: () => Work;
  ms: number[];
}

export async function profileRank({
  rank,
  size,
  args,
}: ThreadRankArguments<{ ops: number; arena: boolean }>) {
  const group = await initProcessGroup({ backend: 'shm', timeoutMs: 120_000 });
  const floats = (length: number) => {
    const buffer = allocateShared(Float32Array, length, { arena: args.arena });
    for (let index = 0; index < length; index++) buffer[index] = (index % 13) - 6;
    return buffer;
  };
  const count = ELEMENTS / size;
  const reduced = floats(ELEMENTS);
  const gathered = floats(ELEMENTS);
  const shard = floats(count);
  const gatheredInPlace = floats(ELEMENTS);
  const scattered = floats(ELEMENTS);
  const scatteredInPlace = floats(ELEMENTS);
  const block = (buffer: Float32Array) => buffer.subarray(rank * count, (rank + 1) * count);
  const cases: ProfileCase[] = [
    { name: 'allReduce', issue: () => group.allReduce(reduced, { op: 'avg' }), ms: [] },
    { name: 'allGather', issue: () => group.allGather(gathered, shard), ms: [] },
    {
      name: 'allGather in place',
      issue: () => group.allGather(gatheredInPlace, block(gatheredInPlace)),
      ms: [],
    },
    { name: 'reduceScatter', issue: () => group.reduceScatter(shard, scattered, { op: 'avg' }), ms: [] },
    {
      name: 'reduceScatter in place',
      issue: () => group.reduceScatter(block(scatteredInPlace), scatteredInPlace, { op: 'avg' }),
      ms: [],
    },
  ];
  try {
    for (let op = 0; op < WARMUP + args.ops; op++)
      for (const each of cases) {
        group.barrier().wait();
        const start = performance.now();
        each.issue().wait();
        if (op >= WARMUP) each.ms.push(performance.now() - start);
      }
    return cases.map((each) => ({ name: each.name, medianMs: median(each.ms), minMs: Math.min(...each.ms) }));
  } finally {
    await group.destroy();
  }
}

if (isMainThread) {
  const ops = Number(process.env.FSDP_PROFILE_OPS ?? 30);
  const arena = process.env.FSDP_PROFILE_PLACEMENT !== 'plain';
  const { loadavg } = await import('node:os');
  const load = () =>
    loadavg()
      .map((value) => value.toFixed(1))
      .join(' ');
  console.log(
    `shm profile, W=2, 16 MiB float32 on ${arena ? 'arena' : 'plain'} buffers, ${ops} ops per case after ${WARMUP}, interleaved (load average ${load()})`,
  );
  const results = (await spawnThreadRanks(2, new URL(import.meta.url), 'profileRank', {
    args: { ops, arena },
    timeoutMs: 600_000,
  })) as { name: string; medianMs: number; minMs: number }[][];
  for (const row of results[0]!)
    console.log(
      `  ${row.name.padEnd(24)} main thread: median ${row.medianMs.toFixed(3)} ms, min ${row.minMs.toFixed(3)} ms`,
    );
  console.log(`load average ${load()}`);
}
