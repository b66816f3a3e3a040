/**
 * One process of the compute-bound benchmark (started by bench.ts): single-process `model.fit`
 * (`--mode single`) or one rank of `ShardedTrainer.fit` under fsdp-run (`--mode sharded`), on the
 * wide MLP. One warm-up fit of two global batches, then one timed epoch; writes wall seconds and
 * this process's CPU seconds of the timed epoch as JSON to `--out` (ranks: `<out>.rank<r>`).
 * `--profile <prefix>`: a V8 CPU profile of the timed epoch's main thread to
 * `<prefix>.<mode>-rank<r>.cpuprofile` (open in Chrome DevTools; `src/profile-summary.ts` sums it).
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { initProcessGroup } from '@fsdp-ts/collectives';
import { ShardedTrainer, type ShardedTrainerStrategy, type TrainerMemory } from '@fsdp-ts/layers';
import { computeInfo, initBackend } from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
import { startProfile } from './cpu-profile';
import { makeDigits } from './digits';
import { buildWideModel } from './wide-model';

export interface BenchProcessResult {
  /** computeInfo().summary: the tfjs backend and the matMul kernel it runs. */
  backend: string;
  parameters: number;
  seconds: number;
  cpuSeconds: number;
  /** Sharded runs: trainer.memory() after the timed epoch (between steps; peak since it began). */
  memory: TrainerMemory | null;
}

const { values } = parseArgs({
  options: {
    mode: { type: 'string', default: 'single' },
    strategy: { type: 'string', default: 'replicate' },
    samples: { type: 'string', default: '8192' },
    'batch-size': { type: 'string', default: '1024' },
    hidden: { type: 'string', default: '1024' },
    out: { type: 'string' },
    profile: { type: 'string' },
    /** 'off': bucket reductions after backward (ShardedTrainer's overlapGradientReduction false). */
    overlap: { type: 'string', default: 'on' },
    'bucket-bytes': { type: 'string' },
  },
  strict: true,
});
const samples = Number(values.samples);
const batchSize = Number(values['batch-size']);
await initBackend(process.env.FSDP_BACKEND === undefined ? 'cpu' : undefined);
const model = buildWideModel(Number(values.hidden));
const { x, y } = makeDigits(samples, 1);
const warmX = x.slice(0, 2 * batchSize);
const warmY = y.slice(0, 2 * batchSize);
const fitArgs = { batchSize, epochs: 1, verbose: 0 as const, shuffle: false };

let fit: (xs: tf.Tensor, ys: tf.Tensor) => Promise<unknown>;
let finish = async () => {};
let memory = (): TrainerMemory | null => null;
let rank = 0;
if (values.mode === 'single') {
  fit = (xs, ys) => model.fit(xs, ys, fitArgs);
} else {
  const group = await initProcessGroup();
  rank = group.rank;
  const trainer = new ShardedTrainer(model, {
    group,
    strategy: values.strategy as ShardedTrainerStrategy,
    optimizer: 'adam',
    optimizerOptions: { eps: 1e-7 },
    overlapGradientReduction: values.overlap !== 'off',
    ...(values['bucket-bytes'] === undefined ? {} : { bucketSizeBytes: Number(values['bucket-bytes']) }),
  });
  fit = (xs, ys) => trainer.fit(xs, ys, fitArgs);
  memory = () => trainer.memory();
  finish = () => group.destroy();
}
await fit(warmX, warmY);
const profiler = values.profile === undefined ? null : await startProfile();
const cpuBefore = process.cpuUsage();
const started = performance.now();
await fit(x, y);
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
const held = memory();
if (profiler !== null) await profiler.stop(`${values.profile}.${values.mode}-rank${rank}.cpuprofile`);
await finish();
const result: BenchProcessResult = {
  backend: computeInfo().summary,
  parameters: model.countParams(),
  seconds,
  cpuSeconds: (cpu.user + cpu.system) / 1e6,
  memory: held,
};
if (values.out !== undefined)
  writeFileSync(values.mode === 'single' ? values.out : `${values.out}.rank${rank}`, JSON.stringify(result));
