/**
 * CPU time per kernel of the reference GPT's training step, with the phases around them:
 * every kernel registered for the wasm backend is wrapped with a CPU-time counter after warm-up,
 * and the optimizer step, zeroGrad and the rest of the step (tfjs engine, tape, uploads,
 * gradient reads) are timed around it. The matMul rows add what the same GEMM shapes cost as
 * bare cblas_sgemm calls on plain arrays (the BLAS floor).
 *
 *   BATCH=8 SEQ=128 STEPS=10 node --conditions=@fsdp-ts/source --import tsx bench/kernel-times.ts
 */
import { computeInfo, initBackend } from '@fsdp-ts/tensor';
import {
  CBLAS_NO_TRANSPOSE as N,
  nativeSgemm,
  CBLAS_ROW_MAJOR as ROW,
  CBLAS_TRANSPOSE as T,
} from '@fsdp-ts/tensor/internal';
import * as tf from '@tensorflow/tfjs-core';
import { makeTrainingStep, referenceConfig } from './training-step';

const batch = Number(process.env.BATCH ?? 8);
const seqLen = Number(process.env.SEQ ?? 128);
const steps = Number(process.env.STEPS ?? 10);

await initBackend('wasm');
const step = makeTrainingStep({ ...referenceConfig, seqLen: Math.max(seqLen, 16) }, batch, seqLen);
for (let index = 0; index < 3; index++) step.run();

const cpuMs = () => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
};
const kernelTime = new Map<string, { ms: number; calls: number }>();
let depth = 0;
for (const config of tf.getKernelsForBackend('wasm')) {
  const inner = config.kernelFunc;
  tf.unregisterKernel(config.kernelName, 'wasm');
  tf.registerKernel({
    ...config,
    kernelFunc: ((args: unknown) => {
      if (depth > 0) return (inner as (a: unknown) => unknown)(args); // nested: counted by the caller
      depth++;
      const start = cpuMs();
      try {
        return (inner as (a: unknown) => unknown)(args);
      } finally {
        depth--;
        const entry = kernelTime.get(config.kernelName) ?? { ms: 0, calls: 0 };
        entry.ms += cpuMs() - start;
        entry.calls++;
        kernelTime.set(config.kernelName, entry);
      }
    }) as tf.KernelFunc,
  });
}
step.run(); // warm the wrappers
kernelTime.clear();
const start = cpuMs();
for (let index = 0; index < steps; index++) step.run();
const total = (cpuMs() - start) / steps;
const rows = [...kernelTime].sort((a, b) => b[1].ms - a[1].ms);
let kernels = 0;
console.log(`${computeInfo().summary}; batch ${batch}x${seqLen}; ${steps} steps; CPU ms per step`);
for (const [name, { ms, calls }] of rows) {
  kernels += ms / steps;
  if (ms / steps >= 0.05)
    console.log(
      `${(ms / steps).toFixed(2).padStart(8)}  ${String(calls / steps).padStart(5)} calls  ${name}`,
    );
}
console.log(`${kernels.toFixed(1).padStart(8)}  all kernels`);
console.log(`${total.toFixed(1).padStart(8)}  whole step (kernels + optimizer + engine/tape/uploads/reads)`);

// The BLAS floor: the step's Linear GEMMs (forward, dx, dW) as bare sgemm calls on plain arrays.
const sgemm = nativeSgemm();
if (sgemm !== null) {
  const rows = batch * seqLen;
  const { dModel, nLayers, vocabSize } = referenceConfig;
  const shapes: [number, number, number][] = [
    [3 * dModel, dModel, nLayers],
    [dModel, dModel, nLayers],
    [4 * dModel, dModel, nLayers],
    [dModel, 4 * dModel, nLayers],
    [vocabSize, dModel, 1],
  ];
  const time = (run: () => void) => {
    run();
    const begin = cpuMs();
    for (let index = 0; index < steps; index++) run();
    return (cpuMs() - begin) / steps;
  };
  let forward = 0;
  let backward = 0;
  for (const [out, inFeatures, count] of shapes) {
    const x = new Float32Array(rows * inFeatures).fill(0.5);
    const weight = new Float32Array(out * inFeatures).fill(0.25);
    const y = new Float32Array(rows * out);
    const dx = new Float32Array(rows * inFeatures);
    const dWeight = new Float32Array(out * inFeatures);
    forward +=
      count *
      time(() => sgemm(ROW, N, T, rows, out, inFeatures, 1, x, inFeatures, weight, inFeatures, 0, y, out));
    backward +=
      count *
      time(() => sgemm(ROW, N, N, rows, inFeatures, out, 1, y, out, weight, inFeatures, 0, dx, inFeatures));
    backward +=
      count *
      time(() => sgemm(ROW, T, N, out, inFeatures, rows, 1, y, out, x, inFeatures, 0, dWeight, inFeatures));
  }
  console.log(
    `bare sgemm, the Linear shapes: forward ${forward.toFixed(1)} ms, backward ${backward.toFixed(1)} ms per step`,
  );
}
