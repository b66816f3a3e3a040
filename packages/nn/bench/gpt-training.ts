/**
 * Single-process training throughput of the reference GPT on wasm (one thread):
 * vocab 256, dModel 256, 4 layers, 4 heads, seqLen 128, batch 8; forward + backward + inline AdamW.
 * Prints a table and writes bench-results/nn-gpt-training.json at the repository root.
 *
 *   npm run bench -w @fsdp-ts/nn            (FSDP_BACKEND=cpu to try the cpu backend)
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { initBackend, type Parameter } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { backward, crossEntropy, GPT } from '../src/index';

const config = {
  vocabSize: 256,
  dModel: 256,
  nLayers: 4,
  nHeads: 4,
  seqLen: 128,
  tieEmbeddings: true,
  seed: 0,
};
const batch = 8;
const warmupSteps = Number(process.env.WARMUP ?? 3);
const measuredSteps = Number(process.env.STEPS ?? 12);

const backend = await initBackend((process.env.FSDP_BACKEND as 'wasm' | 'cpu' | undefined) ?? 'wasm');
const model = new GPT(config);
const parameters = model.parameters();
const parameterCount = parameters.reduce((sum, parameter) => sum + parameter.numel, 0);

/** Inline AdamW (the optim package is separate); updates in place over the Parameter views. */
function makeAdamW(list: readonly Parameter[], lr: number) {
  const moments = list.map((parameter) => ({
    first: new Float32Array(parameter.numel),
    second: new Float32Array(parameter.numel),
  }));
  let step = 0;
  return () => {
    step += 1;
    const correction1 = 1 - 0.9 ** step;
    const correction2 = 1 - 0.999 ** step;
    list.forEach((parameter, index) => {
      if (parameter.grad === null) return;
      const data = parameter.data.typedArray() as Float32Array;
      const grad = parameter.grad.typedArray() as Float32Array;
      const { first, second } = moments[index]!;
      for (let element = 0; element < data.length; element++) {
        const g = grad[element]!;
        first[element] = 0.9 * first[element]! + 0.1 * g;
        second[element] = 0.999 * second[element]! + 0.001 * g * g;
        const update = first[element]! / correction1 / (Math.sqrt(second[element]! / correction2) + 1e-8);
        data[element] = data[element]! * (1 - lr * 0.01) - lr * update;
        grad[element] = 0;
      }
    });
  };
}
const optimizerStep = makeAdamW(parameters, 3e-4);

// A fixed batch of random tokens; the task does not matter for throughput.
const tokenValues = Int32Array.from({ length: batch * config.seqLen }, (_, index) => (index * 7919) % 256);
const tokens = tf.tensor(tokenValues, [batch, config.seqLen], 'int32');
const targets = tf.tensor(
  tokenValues.map((value) => (value + 1) % 256),
  [batch, config.seqLen],
  'int32',
);

/**
 * Median rate of a plain 2-D matMul [1024, 256] x [256, 1024] (the MLP's shape): the backend's
 * peak. wasm and cpu kernels run synchronously, so no read-back is timed (reading 4 MB into fresh
 * memory would add page faults that are not matMul work).
 */
function matMulPeak(): { gflops: number; gflopsPerCpuSecond: number } {
  const a = tf.randomNormal([batch * config.seqLen, config.dModel]);
  const b = tf.randomNormal([config.dModel, 4 * config.dModel]);
  const times: number[] = [];
  const cpuTimes: number[] = [];
  for (let repeat = 0; repeat < 25; repeat++) {
    const start = performance.now();
    const cpuStart = process.cpuUsage();
    const product = tf.matMul(a, b);
    product.dispose();
    const cpu = process.cpuUsage(cpuStart);
    times.push(performance.now() - start);
    cpuTimes.push((cpu.user + cpu.system) / 1000);
  }
  a.dispose();
  b.dispose();
  const sorted = times.slice(5).sort((x, y) => x - y);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  const cpuMedian = cpuTimes.slice(5).sort((x, y) => x - y)[10]!;
  const flops = 2 * batch * config.seqLen * config.dModel * 4 * config.dModel;
  return { gflops: flops / median / 1e6, gflopsPerCpuSecond: flops / cpuMedian / 1e6 };
}

const stepTimes: number[] = [];
// CPU time of this process per step (user + system, all its threads): less sensitive than wall
// time to other processes competing for the 2 cores, so it shows what a quiet machine would do.
const cpuTimes: number[] = [];
const losses: number[] = [];
const tensorsBefore = tf.memory().numTensors;
for (let step = 0; step < warmupSteps + measuredSteps; step++) {
  const start = performance.now();
  const cpuStart = process.cpuUsage();
  const loss = backward(model, () => crossEntropy(model.forward(tokens), targets));
  optimizerStep();
  const elapsed = performance.now() - start;
  const cpu = process.cpuUsage(cpuStart);
  losses.push(loss);
  if (step >= warmupSteps) {
    stepTimes.push(elapsed);
    cpuTimes.push((cpu.user + cpu.system) / 1000);
  }
  process.stderr.write(`step ${step} ${elapsed.toFixed(0)} ms loss ${loss.toFixed(4)}\n`);
}
const tensorsAfter = tf.memory().numTensors;
const peak = matMulPeak();

// FLOPs per step: 6 · (matMul parameters) · tokens for the dense layers (forward 2, backward 4),
// plus attention scores and mixing: 4 matMuls of B·H·T·T·headSize (q·kᵀ, p·v) forward, twice
// that backward, 2 FLOPs per multiply-add.
const tokensPerStep = batch * config.seqLen;
const { dModel, nLayers, seqLen, vocabSize } = config;
const denseParameters = nLayers * (12 * dModel * dModel) + vocabSize * dModel;
const attentionFlops = nLayers * 3 * 2 * 2 * batch * seqLen * seqLen * dModel;
const flopsPerStep = 6 * denseParameters * tokensPerStep + attentionFlops;

const sorted = [...stepTimes].sort((a, b) => a - b);
const median = sorted[Math.floor(sorted.length / 2)]!;
const sortedCpu = [...cpuTimes].sort((a, b) => a - b);
const medianCpu = sortedCpu[Math.floor(sortedCpu.length / 2)]!;
const summary = {
  benchmark: 'nn-gpt-training',
  backend,
  date: new Date().toISOString(),
  note: 'shared, noisy machine (2 cores, several agents running in parallel)',
  config: { ...config, batch },
  parameters: parameterCount,
  warmupSteps,
  measuredSteps,
  stepMs: { min: sorted[0]!, median, max: sorted[sorted.length - 1]! },
  tokensPerSecond: {
    min: (tokensPerStep / sorted[sorted.length - 1]!) * 1000,
    median: (tokensPerStep / median) * 1000,
    max: (tokensPerStep / sorted[0]!) * 1000,
  },
  cpuMsPerStep: { min: sortedCpu[0]!, median: medianCpu, max: sortedCpu[sortedCpu.length - 1]! },
  tokensPerCpuSecond: (tokensPerStep / medianCpu) * 1000,
  loadAverage: os.loadavg(),
  achievedGflops: flopsPerStep / median / 1e6,
  matMulPeakGflops: peak.gflops,
  achievedGflopsPerCpuSecond: flopsPerStep / medianCpu / 1e6,
  matMulPeakGflopsPerCpuSecond: peak.gflopsPerCpuSecond,
  flopsPerStep,
  numTensors: { before: tensorsBefore, after: tensorsAfter },
  firstLoss: losses[0],
  lastLoss: losses[losses.length - 1],
};

console.log(
  `\nGPT training step, ${backend}, ${(parameterCount / 1e6).toFixed(2)} M parameters, batch ${batch} x ${seqLen}`,
);
console.log('(shared noisy machine: 2 cores, other agents running)');
console.log('| metric | min | median | max |');
console.log('| --- | --- | --- | --- |');
console.log(
  `| step ms | ${summary.stepMs.min.toFixed(0)} | ${median.toFixed(0)} | ${summary.stepMs.max.toFixed(0)} |`,
);
console.log(
  `| tokens/s | ${summary.tokensPerSecond.min.toFixed(0)} | ${summary.tokensPerSecond.median.toFixed(0)} | ${summary.tokensPerSecond.max.toFixed(0)} |`,
);
console.log(
  `| CPU ms of this process | ${sortedCpu[0]!.toFixed(0)} | ${medianCpu.toFixed(0)} | ${sortedCpu[sortedCpu.length - 1]!.toFixed(0)} |`,
);
console.log(
  `tokens per CPU-second (median): ${summary.tokensPerCpuSecond.toFixed(0)}; load average ${os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`,
);
console.log(
  `achieved ${summary.achievedGflops.toFixed(1)} GFLOP/s (median step) vs plain 2-D matMul peak ${peak.gflops.toFixed(1)} GFLOP/s (${((100 * summary.achievedGflops) / peak.gflops).toFixed(0)}%)`,
);
console.log(
  `per CPU-second: achieved ${summary.achievedGflopsPerCpuSecond.toFixed(1)} GFLOP vs matMul peak ${peak.gflopsPerCpuSecond.toFixed(1)} GFLOP (${((100 * summary.achievedGflopsPerCpuSecond) / peak.gflopsPerCpuSecond).toFixed(0)}%)`,
);
console.log(`tf.memory().numTensors before ${tensorsBefore}, after ${tensorsAfter}`);

/**
 * The same model, batch and AdamW in PyTorch on one thread, in the same run (so both see the same
 * machine load), when Debian's /usr/bin/python3 has torch. TORCH=0 skips it; TORCH_STEPS sets the
 * measured steps (default 3: a torch step takes ~5 s of CPU here).
 */
function torchReference(): { stepMs: number[]; cpuMs: number[]; torch: string } | null {
  const python = '/usr/bin/python3';
  if (process.env.TORCH === '0' || !existsSync(python)) return null;
  const script = new URL('./torch-gpt-training.py', import.meta.url).pathname;
  const result = spawnSync(python, [script, '1', process.env.TORCH_STEPS ?? '3'], {
    encoding: 'utf8',
    timeout: 900_000,
  });
  if (result.status !== 0) return null;
  return JSON.parse(result.stdout.trim().split('\n').at(-1)!);
}

const torch = torchReference();
const rate = (ms: number) => (tokensPerStep / ms) * 1000;
if (torch !== null) {
  const torchSorted = [...torch.stepMs].sort((a, b) => a - b);
  const torchCpu = [...torch.cpuMs].sort((a, b) => a - b);
  const torchMedian = torchSorted[Math.floor(torchSorted.length / 2)]!;
  const torchCpuMedian = torchCpu[Math.floor(torchCpu.length / 2)]!;
  console.log(
    `\nPyTorch ${torch.torch} (Debian, 1 thread), same model, batch and AdamW, measured right after:`,
  );
  console.log(
    `| tokens/s | ${rate(torchSorted.at(-1)!).toFixed(0)} | ${rate(torchMedian).toFixed(0)} | ${rate(torchSorted[0]!).toFixed(0)} |`,
  );
  console.log(
    `| CPU ms per step | ${torchCpu[0]!.toFixed(0)} | ${torchCpuMedian.toFixed(0)} | ${torchCpu.at(-1)!.toFixed(0)} |`,
  );
  console.log(
    `ratio fsdp-ts / PyTorch: ${(torchMedian / median).toFixed(2)}x tokens/s (wall, median), ${(torchCpuMedian / medianCpu).toFixed(2)}x tokens per CPU-second`,
  );
  Object.assign(summary, {
    torch: {
      version: torch.torch,
      stepMs: torch.stepMs,
      cpuMs: torch.cpuMs,
      tokensPerSecondMedian: rate(torchMedian),
      tokensPerCpuSecond: rate(torchCpuMedian),
    },
  });
}

const directory = new URL('../../../bench-results/', import.meta.url);
mkdirSync(directory, { recursive: true });
writeFileSync(new URL('nn-gpt-training.json', directory), `${JSON.stringify(summary, null, 2)}\n`);
tokens.dispose();
targets.dispose();
