// One simulated rank of the LAMB/LARS sharded test: runs in its own worker thread, steps its
// optimizer on its pieces (views into a SharedArrayBuffer the main thread reads back), and sums
// partial norms with the other ranks through a SharedMemoryGroup.
import { parentPort, workerData } from 'node:worker_threads';
import { Storage } from '@fsdp-ts/tensor';
import { type Cuts, gradPiece, shardedParameters } from './sharding';
import { SharedMemoryGroup, type SharedMemoryGroupBuffers } from './shared-memory-group';
import { fixtures, makeOptimizer } from './torch-fixtures';

export interface NormRankJob {
  rank: number;
  worldSize: number;
  group: SharedMemoryGroupBuffers;
  cases: { caseIndex: number; cuts: Cuts; flat: SharedArrayBuffer; numel: number }[];
}

const job = workerData as NormRankJob;
try {
  const group = new SharedMemoryGroup(job.rank, job.worldSize, job.group);
  for (const { caseIndex, cuts, flat, numel } of job.cases) {
    const params = shardedParameters(
      fixtures.parameters,
      Storage.wrap('float32', flat, 0, numel),
      cuts,
      job.rank,
    );
    const optimizer = makeOptimizer(fixtures.cases[caseIndex]!, params, group);
    for (let step = 0; step < fixtures.steps; step++) {
      params.forEach((param, index) => {
        param.grad = gradPiece(fixtures.grads[step]![index]!, cuts, index, job.rank);
      });
      optimizer.step();
    }
  }
  parentPort!.postMessage({ ok: true });
} catch (error) {
  parentPort!.postMessage({ ok: false, error: String((error as Error).stack ?? error) });
}
