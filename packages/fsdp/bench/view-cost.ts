/**
 * What a Parameter view costs the optimizer: one AdamW step over the reference GPT's parameters as
 * 1-D views into a flat shard (what FSDP hands an optimizer built from model.parameters()) against
 * one AdamW step over a single Parameter spanning the same flat shard (the flat-shard optimizer).
 * Same elements, same arithmetic; interleaved ABBA, 40 rounds.
 *   node --conditions=@fsdp-ts/source --import tsx packages/fsdp/bench/view-cost.ts
 */
import os from 'node:os';
import { GPT } from '@fsdp-ts/nn';
import { AdamW } from '@fsdp-ts/optim';
import { Parameter, TensorView } from '@fsdp-ts/tensor';

// The benchmark's reference GPT (fsdp-training.ts): 3.26 M parameters.
const gpt = new GPT({ vocabSize: 256, dModel: 256, nLayers: 4, nHeads: 4, seqLen: 128, seed: 0 });
const sizes = gpt.parameters().map((parameter) => parameter.numel);
// Rank 0's half of each parameter (W=2), packed into one flat shard and one flat gradient.
const halves = sizes.map((size) => Math.ceil(size / 2));
const total = halves.reduce((sum, size) => sum + size, 0);
const shard = TensorView.zeros([total]);
const gradient = TensorView.zeros([total]);
gradient.fill(1e-3);
let offset = 0;
const views = halves.map((size, index) => {
  const parameter = new Parameter(shard.narrow(0, offset, size), { name: `p${index}` });
  parameter.grad = gradient.narrow(0, offset, size);
  offset += size;
  return parameter;
});
const flat = new Parameter(shard, { name: 'flat' });
flat.grad = gradient;
const viewOptimizer = new AdamW(views, { lr: 1e-4, weightDecay: 0.01 });
const flatOptimizer = new AdamW([flat], { lr: 1e-4, weightDecay: 0.01 });
const time = (optimizer: AdamW) => {
  const start = performance.now();
  optimizer.step();
  return performance.now() - start;
};
for (let warm = 0; warm < 3; warm++) {
  time(viewOptimizer);
  time(flatOptimizer);
}
const viewTimes: number[] = [];
const flatTimes: number[] = [];
for (let round = 0; round < 40; round++) {
  // ABBA: each goes first in half of the rounds.
  if (round % 2 === 0) {
    viewTimes.push(time(viewOptimizer));
    flatTimes.push(time(flatOptimizer));
  } else {
    flatTimes.push(time(flatOptimizer));
    viewTimes.push(time(viewOptimizer));
  }
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
const range = (values: number[]) => `${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)}`;
console.log(`${views.length} views, ${total} elements (rank 0 of W=2)`);
console.log(`AdamW over views: ${median(viewTimes).toFixed(2)} ms (${range(viewTimes)})`);
console.log(`AdamW over one flat shard: ${median(flatTimes).toFixed(2)} ms (${range(flatTimes)})`);
console.log(
  `per view: ${((median(viewTimes) - median(flatTimes)) / views.length).toFixed(4)} ms; load ${os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`,
);
