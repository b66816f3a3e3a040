/**
 * Layer 2, @fsdp-ts/collectives alone: one process of an all-reduce (started by fsdp-run, which
 * sets the env:// variables). Each rank contributes [rank + 1, 10 · (rank + 1)].
 */
import { initProcessGroup } from '@fsdp-ts/collectives';

const group = await initProcessGroup();
const buffer = new Float32Array(new SharedArrayBuffer(8));
buffer.set([group.rank + 1, 10 * (group.rank + 1)]);
group.allReduce(buffer, { op: 'sum' }).wait();
process.stdout.write(
  `rank ${group.rank} of ${group.size} (${group.backend}): all-reduce sum = ${JSON.stringify(Array.from(buffer))}\n`,
);
await group.destroy();
