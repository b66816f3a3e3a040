/**
 * Runs the reference GPT's training step (forward, backward, inline AdamW) for profiling:
 *
 *   BATCH=1 SEQ=16 STEPS=60 node --cpu-prof --cpu-prof-dir=/tmp/prof \
 *     --conditions=@fsdp-ts/source --import tsx bench/profile-gpt-step.ts
 *   node --conditions=@fsdp-ts/source --import tsx bench/summarise-cpu-profile.ts /tmp/prof/*.cpuprofile
 *
 * FSDP_BLAS=off profiles tfjs's wasm matMul instead of OpenBLAS.
 */
import { computeInfo, initBackend } from '@fsdp-ts/tensor';
import { makeTrainingStep, referenceConfig } from './training-step';

const batch = Number(process.env.BATCH ?? 1);
const seqLen = Number(process.env.SEQ ?? 16);
const steps = Number(process.env.STEPS ?? 40);

await initBackend('wasm');
const step = makeTrainingStep({ ...referenceConfig, seqLen: Math.max(seqLen, 16) }, batch, seqLen);
for (let index = 0; index < 3; index++) step.run();
const start = performance.now();
const cpuStart = process.cpuUsage();
for (let index = 0; index < steps; index++) step.run();
const cpu = process.cpuUsage(cpuStart);
console.log(
  `${computeInfo().summary}; batch ${batch}x${seqLen}: ${((performance.now() - start) / steps).toFixed(1)} ms/step wall, ${((cpu.user + cpu.system) / 1000 / steps).toFixed(1)} ms/step CPU`,
);
