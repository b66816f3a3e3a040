/**
 * What no-shard adds to the main thread's CPU in forward + backward (gradient taps, copies into
 * the flat gradient buffers, issuing the all-reduces): the unwrapped reference GPT against the
 * same model wrapped with 'no-shard', W=1 (so no peer and no transfer), 8 × 128, AdamW, steps
 * interleaved (ABBA) in one process, main-thread CPU from the scheduler counters (Linux).
 *   node --conditions=@fsdp-ts/source --import tsx packages/collectives/src/bin/fsdp-run.ts \
 *     --nproc-per-node 1 packages/fsdp/bench/no-shard-main-thread.ts
 */
import { readFileSync } from 'node:fs';
import { initProcessGroup } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel } from '@fsdp-ts/fsdp';
import { backward, crossEntropy, GPT, type Module, TransformerBlock } from '@fsdp-ts/nn';
import { AdamW } from '@fsdp-ts/optim';
import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';

function mainCpuMs(): number {
  return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
}
await initBackend('wasm');
const group = await initProcessGroup();
const config = { vocabSize: 256, dModel: 256, nLayers: 4, nHeads: 4, seqLen: 128, seed: 0 };
const batch = Number(process.env.PROBE_BATCH ?? 8);
const values = Int32Array.from({ length: batch * 128 }, (_, i) => (i * 7919) % 256);
const tokens = tf.tensor(values, [batch, 128], 'int32');
const targets = tf.tensor(
  values.map((v) => (v + 1) % 256),
  [batch, 128],
  'int32',
);
interface Row {
  name: string;
  model: Module;
  forward: (x: tf.Tensor) => tf.Tensor;
  optimizer: AdamW;
  samples: number[];
}
function row(name: string, wrap: boolean): Row {
  const inner = new GPT(config);
  if (!wrap) {
    return {
      name,
      model: inner,
      forward: (x) => inner.forward(x),
      optimizer: new AdamW(inner.parameters()),
      samples: [],
    };
  }
  const model = new FullyShardedDataParallel(inner, {
    group,
    shardingStrategy: 'no-shard',
    autoWrapPolicy: [TransformerBlock],
  });
  return {
    name,
    model,
    forward: (x) => model.forward(x),
    optimizer: new AdamW(model.parameters()),
    samples: [],
  };
}
const rows = [row('unwrapped', false), row('no-shard', true)];
const steps = Number(process.env.PROBE_STEPS ?? 30);
for (let step = 0; step < steps; step++) {
  for (const current of step % 2 === 0 ? rows : [...rows].reverse()) {
    const start = mainCpuMs();
    backward(current.model, () => crossEntropy(current.forward(tokens), targets));
    const used = mainCpuMs() - start;
    current.optimizer.step();
    current.optimizer.zeroGrad();
    if (step >= 3) current.samples.push(used);
  }
}
for (const current of rows) {
  const sorted = [...current.samples].sort((a, b) => a - b);
  const q = (f: number) => sorted[Math.floor(f * (sorted.length - 1))]!.toFixed(1);
  console.log(
    `${current.name.padEnd(10)} forward+backward main CPU ms: median ${q(0.5)} (p25 ${q(0.25)}, p75 ${q(0.75)}, min ${q(0)})`,
  );
}
await group.destroy();
