/**
 * Benchmark of @fsdp-ts/optim: one AdamW step over 10 M float32 elements, next to a memcpy of the
 * same element count (Float32Array.set) measured in the same run, interleaved sample by sample.
 * Bytes touched per element: AdamW reads param, grad, expAvg, expAvgSq and writes param, expAvg,
 * expAvgSq (7 × 4 = 28 B); memcpy reads and writes one array (8 B); LAMB (informative) makes two
 * passes: 6 accesses then 4 (40 B), as WebAssembly SIMD and, beside it, through its scalar
 * JavaScript fallback. Prints a table and writes bench-results/optim-adamw.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { AdamW, LAMB, type Optimizer } from '@fsdp-ts/optim';
import { Parameter, TensorView } from '@fsdp-ts/tensor';
import { startRun } from '../../../bench/internal/run-context';
import {
  type LambCoefficients,
  lambApplyKernel,
  lambMomentsKernel,
} from '../src/internal/kernels/lamb-kernel';

const benchmarkRun = startRun();
const quick = process.argv.includes('--quick');
const numel = quick ? 1_000_000 : 10_000_000;
const repeats = quick ? 5 : 15;

interface Summary {
  min: number;
  median: number;
  max: number;
}

function summarise(samples: number[]): Summary {
  const sorted = [...samples].sort((first, second) => first - second);
  const middle = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  return { min: sorted[0]!, median, max: sorted[sorted.length - 1]! };
}

function filled(length: number, seed: number): Float32Array {
  const array = new Float32Array(length);
  for (let index = 0; index < length; index++) array[index] = Math.sin(index * 0.001 + seed);
  return array;
}

function parameterWithGrad(): Parameter {
  const param = Parameter.fromArray(filled(numel, 1), [numel], { name: 'weight' });
  param.grad = TensorView.fromArray(filled(numel, 2), [numel]);
  return param;
}

const candidates: { name: string; bytesPerElement: number; run: () => void }[] = [];
const source = filled(numel, 3);
const target = new Float32Array(numel);
candidates.push({ name: 'memcpy (Float32Array.set)', bytesPerElement: 8, run: () => target.set(source) });
function addOptimizer(name: string, bytesPerElement: number, optimizer: Optimizer<{ lr: number }>): void {
  candidates.push({ name, bytesPerElement, run: () => optimizer.step() });
}
addOptimizer('AdamW step', 28, new AdamW([parameterWithGrad()], { lr: 1e-6 }));
addOptimizer('AdamW step, amsgrad', 36, new AdamW([parameterWithGrad()], { lr: 1e-6, amsgrad: true }));
addOptimizer('LAMB step (two passes)', 40, new LAMB([parameterWithGrad()], { lr: 1e-6 }));
// The same two passes through the scalar JavaScript kernels (LAMB's fallback without WebAssembly
// SIMD), on arrays of their own: the peer of the SIMD row above.
{
  const [data, grad, expAvg, expAvgSq] = [
    filled(numel, 1),
    filled(numel, 2),
    new Float32Array(numel),
    new Float32Array(numel),
  ];
  const norms = new Float32Array(2);
  const lamb: LambCoefficients = {
    beta1: 0.9,
    beta2: 0.999,
    beta3: 0.1,
    eps: 1e-6,
    weightDecay: 0.01,
    biasCorrection1: 0.1,
    biasCorrection2: 0.001,
  };
  candidates.push({
    name: 'LAMB, scalar JS kernels',
    bytesPerElement: 40,
    run: () => {
      lambMomentsKernel(data, grad, expAvg, expAvgSq, lamb, norms, 0);
      lambApplyKernel(data, expAvg, expAvgSq, lamb, 1e-6);
    },
  });
}

for (const candidate of candidates) for (let warmup = 0; warmup < 3; warmup++) candidate.run();
// [Note: CPU time] The machine is shared: with a load average above the core count, wall time
// mostly measures how long the scheduler kept us off the CPU, and it penalises long operations
// (a 400 ms step is preempted, a 5 ms memcpy often is not). The ratio therefore uses this
// process's CPU time (process.cpuUsage, user + system) per operation; wall time is reported too.
const cpuMilliseconds = () => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
};
const samples = candidates.map(() => [] as number[]);
const wallSamples = candidates.map(() => [] as number[]);
for (let repeat = 0; repeat < repeats; repeat++) {
  candidates.forEach((candidate, index) => {
    const wallStart = performance.now();
    const start = cpuMilliseconds();
    candidate.run();
    samples[index]!.push(cpuMilliseconds() - start);
    wallSamples[index]!.push(performance.now() - wallStart);
  });
}

const rows = candidates.map((candidate, index) => {
  const milliseconds = summarise(samples[index]!);
  const wallMilliseconds = summarise(wallSamples[index]!);
  const perSecond = (ms: number) => (numel / ms) * 1000;
  const elementsPerSecond = {
    min: perSecond(milliseconds.max),
    median: perSecond(milliseconds.median),
    max: perSecond(milliseconds.min),
  };
  const bytesPerSecond = {
    min: elementsPerSecond.min * candidate.bytesPerElement,
    median: elementsPerSecond.median * candidate.bytesPerElement,
    max: elementsPerSecond.max * candidate.bytesPerElement,
  };
  return {
    name: candidate.name,
    bytesPerElement: candidate.bytesPerElement,
    milliseconds,
    wallMilliseconds,
    elementsPerSecond,
    bytesPerSecond,
  };
});
const memcpy = rows[0]!;
const range = (summary: Summary, scale: number, digits: number) =>
  `${(summary.median / scale).toFixed(digits)} (${(summary.min / scale).toFixed(digits)}–${(summary.max / scale).toFixed(digits)})`;
console.log(
  `@fsdp-ts/optim benchmark: ${numel.toLocaleString('en')} float32 elements, ${repeats} samples each, median (min–max)`,
);
console.log('rates from CPU time per operation (see [Note: CPU time]); wall ms alongside');
console.log(
  `${'measure'.padEnd(26)}${'CPU ms'.padStart(22)}${'wall ms'.padStart(24)}${'G elements/s'.padStart(24)}${'GB/s touched'.padStart(24)}  vs memcpy`,
);
for (const row of rows) {
  const ratio = row.bytesPerSecond.median / memcpy.bytesPerSecond.median;
  console.log(
    `${row.name.padEnd(26)}${range(row.milliseconds, 1, 1).padStart(22)}${range(row.wallMilliseconds, 1, 1).padStart(24)}${range(row.elementsPerSecond, 1e9, 3).padStart(24)}${range(row.bytesPerSecond, 1e9, 2).padStart(24)}  ${(100 * ratio).toFixed(0)}%`,
  );
}
const adamw = rows[1]!;
const ratio = adamw.bytesPerSecond.median / memcpy.bytesPerSecond.median;
console.log(`AdamW bandwidth / memcpy bandwidth (medians): ${(100 * ratio).toFixed(0)}% (target >= 50%)`);
console.log(
  `Machine shared with other agents while measuring (load average ${loadavg()[0]!.toFixed(1)} on ${cpus().length} cores): expect noise.`,
);

const directory = join(import.meta.dirname, '..', '..', '..', 'bench-results');
mkdirSync(directory, { recursive: true });
writeFileSync(
  join(directory, 'optim-adamw.json'),
  `${JSON.stringify(
    {
      benchmark: '@fsdp-ts/optim adamw-step',
      context: benchmarkRun.finish(),
      date: new Date().toISOString(),
      node: process.version,
      cpu: cpus()[0]?.model ?? 'unknown',
      cores: cpus().length,
      numel,
      repeats,
      note: 'shared machine (other agents running); interleaved samples; rates from process CPU time',
      loadAverage: loadavg(),
      rows,
      adamwOverMemcpyBandwidth: ratio,
    },
    null,
    2,
  )}\n`,
);
