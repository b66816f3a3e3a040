/**
 * A rank of the multi-host benchmark (started by fsdp-run; see multi-host-bench.ts). Rank 0
 * prints one `RESULT <json>` line: bus bandwidth of all-reduce, all-gather and reduce-scatter
 * (float32, nccl-tests convention) and the training tokens/s of a small GPT under FSDP
 * full-shard, each the min/median/max of timed repetitions after a warm-up.
 */
import { allocateShared, initProcessGroup, type ProcessGroup } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel } from '@fsdp-ts/fsdp';
import { backward, crossEntropy, GPT, type GPTConfig, TransformerBlock } from '@fsdp-ts/nn';
import { AdamW } from '@fsdp-ts/optim';
import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';

const MiB = 1 << 20;
const ITERATIONS = 10;
const WARMUP = 2;

export interface Spread {
  min: number;
  median: number;
  max: number;
}

function spread(values: number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  return { min: sorted[0]!, median: sorted[Math.floor(sorted.length / 2)]!, max: sorted.at(-1)! };
}

type Op = 'allReduce' | 'allGather' | 'reduceScatter';

/** busbw in GB/s: all-reduce bytes/time x 2(n-1)/n; all-gather, reduce-scatter full bytes/time x (n-1)/n. */
function busBandwidth(group: ProcessGroup, op: Op, bytes: number): Spread {
  const n = group.size;
  const elements = bytes / 4;
  const full = allocateShared(Float32Array, elements).fill(1);
  const part = allocateShared(Float32Array, elements / n).fill(1);
  const rates: number[] = [];
  for (let iteration = 0; iteration < WARMUP + ITERATIONS; iteration++) {
    group.barrier().wait();
    const start = performance.now();
    if (op === 'allReduce') group.allReduce(full).wait();
    else if (op === 'allGather') group.allGather(full, part).wait();
    else group.reduceScatter(part, full).wait();
    const seconds = (performance.now() - start) / 1000;
    const factor = op === 'allReduce' ? (2 * (n - 1)) / n : (n - 1) / n;
    if (iteration >= WARMUP) rates.push(((bytes / seconds) * factor) / 1e9);
  }
  return spread(rates);
}

const config: GPTConfig = { vocabSize: 64, dModel: 64, nLayers: 2, nHeads: 4, seqLen: 32, seed: 1 };
const BATCH = 8;

function trainingTokensPerSecond(group: ProcessGroup): Spread {
  const model = new FullyShardedDataParallel(new GPT(config), {
    group,
    shardingStrategy: 'full-shard',
    autoWrapPolicy: [TransformerBlock],
  });
  const optimizer = new AdamW(model.parameters(), { lr: 1e-3 });
  const rates: number[] = [];
  for (let step = 0; step < WARMUP + ITERATIONS; step++) {
    const tokens = Array.from(
      { length: BATCH * config.seqLen },
      (_, i) => (i * 7 + step + group.rank) % config.vocabSize,
    );
    const input = tf.tensor2d(tokens, [BATCH, config.seqLen], 'int32');
    const targets = tf.tensor2d(
      tokens.map((token) => (token + 1) % config.vocabSize),
      [BATCH, config.seqLen],
      'int32',
    );
    group.barrier().wait();
    const start = performance.now();
    backward(model, () => crossEntropy(model.forward(input), targets));
    optimizer.step();
    optimizer.zeroGrad();
    group.barrier().wait();
    const seconds = (performance.now() - start) / 1000;
    tf.dispose([input, targets]);
    if (step >= WARMUP) rates.push((group.size * BATCH * config.seqLen) / seconds);
  }
  return spread(rates);
}

await initBackend('wasm');
const group = await initProcessGroup({ backend: 'tcp' });
try {
  const bandwidth: Record<string, Spread> = {};
  for (const op of ['allReduce', 'allGather', 'reduceScatter'] as const) {
    for (const bytes of [MiB, 16 * MiB])
      bandwidth[`${op} ${bytes / MiB} MiB`] = busBandwidth(group, op, bytes);
  }
  const tokensPerSecond = trainingTokensPerSecond(group);
  if (group.rank === 0) process.stdout.write(`RESULT ${JSON.stringify({ bandwidth, tokensPerSecond })}\n`);
} finally {
  await group.destroy();
}
