/**
 * Mixed-precision benchmark (not a test):
 *   node --conditions=@fsdp-ts/source --import tsx packages/fsdp/bench/mixed-precision.ts
 * World size 2 on shm thread ranks, cpu backend, full-shard, one unit per TransformerBlock.
 *  1. all-gather of a 4 Mi-element float32 shard pair: float32 vs bfloat16 (convert + gather +
 *     widen, as FSDP does), 12 repetitions;
 *  2. training steps of a GPT (vocab 256, dModel 128, 4 layers, seqLen 32, batch 2 per rank),
 *     float32 vs mixedPrecision bf16/bf16: step time and all-gather wait, 3 warm-up + 8 steps.
 * The shm backend copies memory (no wire), so halving the bytes saves copies, not network time.
 * Writes bench-results/fsdp-mixed-precision.json at the repository root.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { initProcessGroup, spawnThreadRanks } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel, type MixedPrecision } from '@fsdp-ts/fsdp';
import { backward, crossEntropy, GPT, type GPTConfig, TransformerBlock } from '@fsdp-ts/nn';
import { AdamW } from '@fsdp-ts/optim';
import { bfloat16ToFloat32, float32ToBfloat16, initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';

const config: GPTConfig = { vocabSize: 256, dModel: 128, nLayers: 4, nHeads: 4, seqLen: 32, seed: 1 };
const batch = 2;

interface Stats {
  min: number;
  median: number;
  max: number;
}

function stats(values: number[]): Stats {
  const sorted = [...values].sort((a, b) => a - b);
  return { min: sorted[0]!, median: sorted[Math.floor(sorted.length / 2)]!, max: sorted.at(-1)! };
}

export async function benchRank({ rank }: { rank: number }): Promise<Record<string, Stats>> {
  await initBackend('cpu');
  const group = await initProcessGroup();
  try {
    const results: Record<string, Stats> = {};
    const count = 4 * 1024 * 1024;
    const shard = new Float32Array(new SharedArrayBuffer(count * 4)).fill(rank + 0.5);
    const full = new Float32Array(new SharedArrayBuffer(count * 8));
    const shard16 = new Uint16Array(new SharedArrayBuffer(count * 2));
    const full16 = new Uint16Array(new SharedArrayBuffer(count * 4));
    for (const dtype of ['float32', 'bfloat16'] as const) {
      const times: number[] = [];
      for (let repetition = 0; repetition < 12; repetition++) {
        group.barrier().wait();
        const start = performance.now();
        if (dtype === 'float32') group.allGather(full, shard).wait();
        else {
          float32ToBfloat16(shard, shard16);
          group.allGather(full16, shard16, { dtype: 'bfloat16' }).wait();
          bfloat16ToFloat32(full16, full);
        }
        times.push(performance.now() - start);
      }
      results[`allGather 2 x 4Mi ${dtype} (ms)`] = stats(times.slice(2));
    }
    for (const mixedPrecision of [
      undefined,
      { paramDtype: 'bfloat16', reduceDtype: 'bfloat16' } as MixedPrecision,
    ]) {
      const label = mixedPrecision === undefined ? 'float32' : 'bf16/bf16';
      const model = new FullyShardedDataParallel(new GPT(config), {
        group,
        autoWrapPolicy: [TransformerBlock],
        ...(mixedPrecision === undefined ? {} : { mixedPrecision }),
      });
      const optimizer = new AdamW(model.parameters(), { lr: 1e-3 });
      const stepTimes: number[] = [];
      const waits: number[] = [];
      for (let step = 0; step < 11; step++) {
        const tokens = tf.randomUniform(
          [batch, config.seqLen],
          0,
          config.vocabSize,
          'int32',
          step * 2 + rank,
        );
        const targets = tf.randomUniform(
          [batch, config.seqLen],
          0,
          config.vocabSize,
          'int32',
          step * 2 + rank + 1,
        );
        group.barrier().wait();
        const start = performance.now();
        backward(model, () => crossEntropy(model.forward(tokens), targets));
        optimizer.step();
        optimizer.zeroGrad();
        if (step >= 3) {
          stepTimes.push(performance.now() - start);
          waits.push(model.statistics.allGatherWaitMs);
        }
        tf.dispose([tokens, targets]);
      }
      results[`training step ${label} (ms)`] = stats(stepTimes);
      results[`all-gather wait ${label} (ms)`] = stats(waits);
    }
    return results;
  } finally {
    await group.destroy();
  }
}

if (isMainThread) {
  const [rank0] = (await spawnThreadRanks(2, import.meta.url, 'benchRank', { timeoutMs: 900_000 })) as Record<
    string,
    Stats
  >[];
  const rows = Object.entries(rank0!).map(([name, { min, median, max }]) => ({
    name,
    min: min.toFixed(1),
    median: median.toFixed(1),
    max: max.toFixed(1),
  }));
  console.table(rows);
  const ratio = (a: string, b: string) => rank0![a]!.median / rank0![b]!.median;
  const ratios = {
    allGatherSpeedUp: ratio('allGather 2 x 4Mi float32 (ms)', 'allGather 2 x 4Mi bfloat16 (ms)'),
    stepSpeedUp: ratio('training step float32 (ms)', 'training step bf16/bf16 (ms)'),
  };
  console.log('bfloat16 speed-up (median float32 / median bfloat16):', ratios);
  console.log('Note: measured on a shared 2-core machine under heavy load from other jobs; noisy.');
  const directory = new URL('../../../bench-results/', import.meta.url);
  mkdirSync(directory, { recursive: true });
  writeFileSync(
    new URL('fsdp-mixed-precision.json', directory),
    `${JSON.stringify({ worldSize: 2, backend: 'shm/cpu', results: rank0, ratios, note: 'shared, heavily loaded machine' }, null, 2)}\n`,
  );
}
