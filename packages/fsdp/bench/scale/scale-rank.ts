/**
 * One rank of a `npm run bench:scale` run (started by scale-bench.ts, through fsdp-run unless the
 * run is 'single'). Builds a GPT of the requested shape, wraps it, trains warm-up + measured steps
 * of AdamW at batch 1 × seqLen, times every phase, optionally saves and loads a checkpoint, and
 * writes its figures to `<output>.rank<R>.json`.
 */
import { readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { initProcessGroup, type ProcessGroup } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel, loadCheckpoint, saveCheckpoint } from '@fsdp-ts/fsdp';
import { backward, crossEntropy, GPT, type Module, TransformerBlock } from '@fsdp-ts/nn';
import { AdamW } from '@fsdp-ts/optim';
import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import type { ScaleRankResult, ScaleRunRequest } from './scale-config';

const scriptStartMs = Date.now();
const request = JSON.parse(process.argv[2]!) as ScaleRunRequest;
let peakRss = 0;
/** RSS at the end of each phase, to see where the peak comes from. */
const phaseRss: Record<string, number> = {};
const sampleRss = (phase?: string) => {
  const rss = process.memoryUsage().rss;
  peakRss = Math.max(peakRss, rss);
  if (phase !== undefined) phaseRss[phase] = Math.max(phaseRss[phase] ?? 0, rss);
};

await initBackend('wasm');
sampleRss();
const runtimeRssBytes = process.memoryUsage().rss;
const group: ProcessGroup | null = request.strategy === 'single' ? null : await initProcessGroup();
const rank = group?.rank ?? 0;

let started = performance.now();
const inner = new GPT(request.config);
const initMs = performance.now() - started;
const parameterCount = inner.parameters().reduce((sum, parameter) => sum + parameter.data.numel, 0);
sampleRss('built');
started = performance.now();
const model: Module & { forward(tokens: tf.Tensor): tf.Tensor } =
  group === null
    ? inner
    : new FullyShardedDataParallel(inner, {
        group,
        shardingStrategy: request.strategy === 'single' ? 'no-shard' : request.strategy,
        autoWrapPolicy: [TransformerBlock],
      });
const wrapMs = performance.now() - started;
sampleRss('wrapped');
const estimateBytes = model instanceof FullyShardedDataParallel ? model.memoryEstimate.totalBytes : undefined;
const optimizer = new AdamW(model.parameters(), { lr: 1e-4 });

const tokenValues = Int32Array.from(
  { length: request.batch * request.seqLen },
  (_, index) => (index * 7919 + rank * 31) % request.config.vocabSize,
);
const tokens = tf.tensor(tokenValues, [request.batch, request.seqLen], 'int32');
const targets = tf.tensor(
  tokenValues.map((value) => (value + 1) % request.config.vocabSize),
  [request.batch, request.seqLen],
  'int32',
);

const steps: ScaleRankResult['steps'] = [];
let firstStepAtMs = 0;
for (let step = 0; step < request.warmupSteps + request.measuredSteps; step++) {
  if (step === 0) firstStepAtMs = Date.now();
  const stepStart = performance.now();
  const loss = backward(model, () => crossEntropy(model.forward(tokens), targets));
  const backwardDone = performance.now();
  sampleRss(step === 0 ? 'first backward' : 'backward');
  optimizer.step();
  optimizer.zeroGrad();
  const stepEnd = performance.now();
  sampleRss(step === 0 ? 'first optimizer step' : 'optimizer step');
  const statistics =
    model instanceof FullyShardedDataParallel ? model.statistics : { allGatherWaitMs: 0, reductionWaitMs: 0 };
  const forwardBackwardMs = backwardDone - stepStart;
  steps.push({
    loss,
    stepMs: stepEnd - stepStart,
    computeMs: forwardBackwardMs - statistics.allGatherWaitMs - statistics.reductionWaitMs,
    allGatherWaitMs: statistics.allGatherWaitMs,
    reductionWaitMs: statistics.reductionWaitMs,
    optimizerMs: stepEnd - backwardDone,
  });
}

let checkpoint: ScaleRankResult['checkpoint'];
if (request.checkpointDirectory !== undefined && model instanceof FullyShardedDataParallel) {
  started = performance.now();
  const saved = saveCheckpoint(request.checkpointDirectory, { model, optimizer, step: 1, keep: 1 });
  const saveMs = performance.now() - started;
  sampleRss();
  started = performance.now();
  loadCheckpoint(saved.path, { model, optimizer });
  const loadMs = performance.now() - started;
  sampleRss();
  const bytes = readdirSync(saved.path).reduce((sum, name) => sum + statSync(join(saved.path, name)).size, 0);
  checkpoint = { saveMs, loadMs, bytes };
}

const result: ScaleRankResult = {
  rank,
  runtimeRssBytes,
  peakRssBytes: peakRss,
  phaseRssBytes: phaseRss,
  estimateBytes,
  parameters: parameterCount,
  initMs,
  wrapMs,
  scriptStartMs,
  firstStepAtMs,
  steps,
  checkpoint,
};
writeFileSync(`${request.output}.rank${rank}.json`, JSON.stringify(result));
tokens.dispose();
targets.dispose();
await group?.destroy();
