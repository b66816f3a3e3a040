/**
 * A worker of `npm run bench:elastic` (under fsdp-run --nnodes MIN:MAX): prints
 * `worker <rank>/<world size> round <round> local <local rank>` on start, joins the round's tcp
 * group, then runs steps until stopped, each a 1 MiB all-reduce followed by 50 ms standing in for
 * the step's compute; after its first step of the round it prints
 * `first step round <round> rank <rank>`. When a launcher joins (restartRequested, agreed by
 * every rank) it exits 0, as a training script would after its checkpoint; a failed step (a peer
 * lost) exits 1.
 */
import { allocateShared, initProcessGroup, restartRequested } from '../src/index.js';

const round = process.env.FSDP_ELASTIC_ROUND;
console.log(
  `worker ${process.env.RANK}/${process.env.WORLD_SIZE} round ${round} local ${process.env.LOCAL_RANK}`,
);
const group = await initProcessGroup({ backend: 'tcp', timeoutMs: 60_000 });
const gradients = allocateShared(Float32Array, (1 << 20) / 4);
for (let step = 0; ; step++) {
  await group.allReduce(gradients);
  if (step === 0) console.log(`first step round ${round} rank ${group.rank}`);
  if (restartRequested(group)) break;
  await new Promise((resolve) => setTimeout(resolve, 50));
}
await group.destroy();
