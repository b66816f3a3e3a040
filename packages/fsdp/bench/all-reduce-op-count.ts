/**
 * The communication worker's CPU for the reference GPT's 12.6 MB of gradients all-reduced as 1, 5,
 * 17 or 50 ops (W=2, tcp over fsdp-run), interleaved, 10 measured rounds, rank 0's medians: what
 * splitting no-shard's buckets finer costs the worker ("Buckets smaller than a unit" in the decision
 * record 2026-12-01-no-shard-reduction.md). The ops are issued together here; issued one by one
 * during backward, each also pays its wake-ups while both cores compute.
 *   PROBE_COUNTS=1,5,17,50 node --conditions=@fsdp-ts/source --import tsx \
 *     packages/collectives/src/bin/fsdp-run.ts --nproc-per-node 2 packages/fsdp/bench/all-reduce-op-count.ts
 */
import { readdirSync, readFileSync } from 'node:fs';
import { allocateShared, initProcessGroup, type Work } from '@fsdp-ts/collectives';

function threads(): Set<string> {
  return new Set(readdirSync('/proc/self/task'));
}
function cpu(tids: Iterable<string>): [number, number] {
  let on = 0;
  let runnable = 0;
  for (const tid of tids) {
    try {
      const [a, b] = readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ');
      on += Number(a) / 1e6;
      runnable += Number(b) / 1e6;
    } catch {
      // the thread ended
    }
  }
  return [on, runnable];
}
const before = threads();
const group = await initProcessGroup();
const worker = [...threads()].filter((tid) => !before.has(tid));
const total = 3_150_000; // 12.6 MB of float32
const buffer = allocateShared(Float32Array, total);
buffer.fill(group.rank + 1);
const counts = (process.env.PROBE_COUNTS ?? '1,5,17,50').split(',').map(Number);
const samples = new Map<number, number[]>(counts.map((count) => [count, []]));
const walls = new Map<number, number[]>(counts.map((count) => [count, []]));
for (let round = 0; round < 12; round++) {
  for (const count of round % 2 === 0 ? counts : [...counts].reverse()) {
    group.barrier().wait();
    const [start] = cpu(worker);
    const t0 = performance.now();
    const works: Work[] = [];
    const size = Math.ceil(total / count);
    for (let offset = 0; offset < total; offset += size)
      works.push(group.allReduce(buffer.subarray(offset, Math.min(total, offset + size)), { op: 'avg' }));
    for (const work of works) work.wait();
    const wall = performance.now() - t0;
    const [end] = cpu(worker);
    if (round >= 2) {
      samples.get(count)!.push(end - start);
      walls.get(count)!.push(wall);
    }
  }
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
if (group.rank === 0)
  for (const count of counts)
    console.log(
      `${String(count).padStart(3)} ops: worker CPU ${median(samples.get(count)!).toFixed(2)} ms, wall ${median(walls.get(count)!).toFixed(2)} ms`,
    );
await group.destroy();
