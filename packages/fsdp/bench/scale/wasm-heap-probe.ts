/**
 * `npm run bench:wasm-heap -w @fsdp-ts/fsdp`: how tfjs's wasm heap grows while FSDP trains the
 * 1.3 B GPT's block shape (d 2048, 16 heads, 64 positions, batch 1) in one rank, full-shard,
 * PROBE_LAYERS blocks (default 10), PROBE_STEPS steps (default 2), PROBE_RECOMPUTE=1 for
 * activation checkpointing. The heap grows and never
 * shrinks, so its size after each unit's forward and after each backward is the high-water mark
 * a capped rank pays for (the offload headline of bench:scale runs out of memory there). Run it
 * through fsdp-run: `node --conditions=@fsdp-ts/source --import tsx ../collectives/src/bin/fsdp-run.ts
 * --nproc-per-node 1 bench/scale/wasm-heap-probe.ts`.
 */
import { initProcessGroup } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel } from '@fsdp-ts/fsdp';
import { backward, crossEntropy, GPT, TransformerBlock } from '@fsdp-ts/nn';
import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';

await initBackend('wasm');
const MiB = 2 ** 20;
const heapMiB = () =>
  ((tf.backend() as unknown as { wasm: { HEAPU8: Uint8Array } }).wasm.HEAPU8.byteLength / MiB).toFixed(0);
const layers = Number(process.env.PROBE_LAYERS ?? 10);
const steps = Number(process.env.PROBE_STEPS ?? 2);
const group = await initProcessGroup();
const config = { vocabSize: 256, dModel: 2048, nLayers: layers, nHeads: 16, seqLen: 64, seed: 0 };
const model = new FullyShardedDataParallel(new GPT(config), {
  group,
  shardingStrategy: 'full-shard',
  autoWrapPolicy: [TransformerBlock],
  activationCheckpointing: process.env.PROBE_RECOMPUTE === '1',
});
const unitMiB = (12 * config.dModel ** 2 * 4) / MiB;
console.log(`${layers} blocks of ${unitMiB.toFixed(0)} MiB each; wasm heap after wrapping ${heapMiB()} MiB`);
const tokens = tf.tensor(
  Int32Array.from({ length: 64 }, (_, index) => index % 256),
  [1, 64],
  'int32',
);
const targets = tf.tensor(
  Int32Array.from({ length: 64 }, (_, index) => (index + 1) % 256),
  [1, 64],
  'int32',
);
const afterForward: string[] = [];
for (const unit of model.units) {
  const module = unit.module as unknown as { forward: (...args: unknown[]) => unknown };
  const forward = module.forward.bind(module);
  module.forward = (...args: unknown[]) => {
    const output = forward(...args);
    afterForward.push(heapMiB());
    return output;
  };
}
for (let step = 0; step < steps; step++) {
  afterForward.length = 0;
  backward(model, () => crossEntropy(model.forward(tokens), targets));
  console.log(
    `step ${step}: heap after each unit's forward ${afterForward.join(' ')} MiB; after backward ${heapMiB()} MiB`,
  );
}
tf.dispose([tokens, targets]);
await group.destroy();
