/**
 * Where a no-shard step's waiting goes: W=2 over fsdp-run (tcp), the reference GPT at 8 × 128 per
 * rank, one unit per block, AdamW. Per measured step, rank 0 reports (times relative to each
 * rank's exit from the step's opening barrier):
 *   - imbalance: |rank 0's backward end − rank 1's| (every two-rank row pays the slower one);
 *   - tail: the later rank's end of its all-reduce wait − the later backward end (what the
 *     reductions still running after both ranks' backward cost);
 *   - the communication worker's on-CPU ms and the ms it was runnable without a core.
 *   node --conditions=@fsdp-ts/source --import tsx packages/collectives/src/bin/fsdp-run.ts \
 *     --nproc-per-node 2 packages/fsdp/bench/no-shard-tail.ts [steps]
 * Linux only (per-thread scheduler counters, as bench/phase-profile.ts).
 */

import { readFileSync } from 'node:fs';
import { allocateShared, initProcessGroup } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel } from '@fsdp-ts/fsdp';
import { type BackwardPlan, backward, backwardHook, crossEntropy, GPT, TransformerBlock } from '@fsdp-ts/nn';
import { AdamW } from '@fsdp-ts/optim';
import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { threadsStartedBy } from './phase-profile';

const steps = Number(process.argv[2] ?? 20);
const warmup = 2;
await initBackend('wasm');
const { value: group, threads } = await threadsStartedBy(() => initProcessGroup());
const model = new FullyShardedDataParallel(
  new GPT({ vocabSize: 256, dModel: 256, nLayers: 4, nHeads: 4, seqLen: 128, seed: 0 }),
  { group, shardingStrategy: 'no-shard', autoWrapPolicy: [TransformerBlock] },
);
const optimizer = new AdamW(model.parameters(), { lr: 1e-4, weightDecay: 0.01 });

/** [on-CPU ms, runnable-without-a-core ms] of the communication worker's threads. */
function workerCounters(): [number, number] {
  let onCpu = 0;
  let runnable = 0;
  for (const tid of threads) {
    try {
      const [a, b] = readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ');
      onCpu += Number(a) / 1e6;
      runnable += Number(b) / 1e6;
    } catch {
      // the thread ended
    }
  }
  return [onCpu, runnable];
}

// Backward's end: the moment the wrapper's afterGradients starts waiting for the reductions.
let stepStart = 0;
let backwardEnd = 0;
const hook = model[backwardHook].bind(model);
Object.defineProperty(model, backwardHook, {
  value: (): BackwardPlan => {
    const plan = hook();
    return {
      ...plan,
      afterGradients: () => {
        backwardEnd = performance.now() - stepStart;
        plan.afterGradients?.();
      },
    };
  },
});

const batch = 8;
const values = Int32Array.from({ length: batch * 128 }, (_, index) => (index * 7919 + group.rank * 31) % 256);
const tokens = tf.tensor(values, [batch, 128], 'int32');
const targets = tf.tensor(
  values.map((value) => (value + 1) % 256),
  [batch, 128],
  'int32',
);
// Per measured step: backward end, wait end, worker on-CPU, worker runnable (ms).
const mine = allocateShared(Float32Array, 4 * (steps - warmup));
for (let step = 0; step < steps; step++) {
  group.barrier().wait();
  const worker = workerCounters();
  stepStart = performance.now();
  backward(model, () => crossEntropy(model.forward(tokens), targets));
  const waitEnd = performance.now() - stepStart;
  const after = workerCounters();
  optimizer.step();
  optimizer.zeroGrad();
  if (step >= warmup)
    mine.set([backwardEnd, waitEnd, after[0] - worker[0], after[1] - worker[1]], 4 * (step - warmup));
}
const all = allocateShared(Float32Array, mine.length * group.size);
group.allGather(all, mine).wait();
if (group.rank === 0) {
  const median = (list: number[]) => [...list].sort((a, b) => a - b)[list.length >> 1]!;
  const imbalance: number[] = [];
  const tail: number[] = [];
  for (let step = 0; step < steps - warmup; step++) {
    const at = (rank: number, field: number) => all[rank * mine.length + 4 * step + field]!;
    imbalance.push(Math.abs(at(0, 0) - at(1, 0)));
    tail.push(Math.max(at(0, 1), at(1, 1)) - Math.max(at(0, 0), at(1, 0)));
  }
  const field = (index: number) =>
    Array.from({ length: steps - warmup }, (_, step) => all[4 * step + index]!);
  console.log(
    `no-shard W=2, ${steps - warmup} steps, medians: rank imbalance ${median(imbalance).toFixed(1)} ms; tail after the later backward ${median(tail).toFixed(1)} ms (min ${Math.min(...tail).toFixed(1)}, max ${Math.max(...tail).toFixed(1)}); rank 0's communication worker on-CPU ${median(field(2)).toFixed(1)} ms, runnable without a core ${median(field(3)).toFixed(1)} ms per step`,
  );
}
await group.destroy();
