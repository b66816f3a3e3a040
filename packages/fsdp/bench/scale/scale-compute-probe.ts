/**
 * `npm run bench:scale-compute`: where a step's compute goes at the widths of the 100 M and
 * 350 M shapes, in one process (no FSDP, no communication), to explain how step time grows
 * with parameters (the "linear within 20%" target of bench:scale).
 *
 * For d = 768 and d = 1024 at batch 1 × 64: (1) the twelve sgemm calls of one TransformerBlock
 * (qkv, projection, fc1, fc2; forward, input gradient, weight gradient) through the same
 * OpenBLAS the Linear kernel calls, timed alone: GFLOP/s per shape; (2) one block's forward and
 * its forward + backward through nn on the wasm backend; the difference is what is not sgemm
 * (attention, LayerNorm, GELU, adds, tfjs dispatch). Each figure is the median of interleaved
 * repetitions (d = 768 and d = 1024 alternate), in CPU time (wall time next to it). Then the two
 * shapes' compute per step under activation checkpointing (forward, recomputed forward,
 * backward per block) is predicted from these parts, with the ratio to their parameter ratio.
 */
import os from 'node:os';
import { backward, TransformerBlock } from '@fsdp-ts/nn';
import { initBackend } from '@fsdp-ts/tensor';
import { CBLAS_NO_TRANSPOSE, CBLAS_ROW_MAJOR, CBLAS_TRANSPOSE, nativeSgemm } from '@fsdp-ts/tensor/internal';
import * as tf from '@tensorflow/tfjs-core';
import { gptParameterCount, scaleModels } from './scale-config';

const ROWS = 64;
const REPEATS = Number(process.env.BENCH_PROBE_REPEATS ?? 7);
const widths = [
  {
    model: '100M',
    d: scaleModels['100M'].dModel,
    heads: scaleModels['100M'].nHeads,
    layers: scaleModels['100M'].nLayers,
  },
  {
    model: '350M',
    d: scaleModels['350M'].dModel,
    heads: scaleModels['350M'].nHeads,
    layers: scaleModels['350M'].nLayers,
  },
] as const;

await initBackend('wasm');
const sgemm = nativeSgemm();
if (sgemm === null)
  throw new Error('scale-compute-probe needs the BLAS matMul kernel (OpenBLAS): none was loaded.');

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Wall and CPU milliseconds of `work`. */
function timed(work: () => void): { wall: number; cpu: number } {
  const cpuStart = process.cpuUsage();
  const started = performance.now();
  work();
  const cpu = process.cpuUsage(cpuStart);
  return { wall: performance.now() - started, cpu: (cpu.user + cpu.system) / 1000 };
}

/** The sgemm calls of one block's Linear layers: [m, n, k, transposeA, transposeB] per call. */
function blockSgemms(
  d: number,
): { label: string; m: number; n: number; k: number; ta: number; tb: number }[] {
  const N = CBLAS_NO_TRANSPOSE;
  const T = CBLAS_TRANSPOSE;
  const linears = [
    { name: 'qkv', inF: d, outF: 3 * d },
    { name: 'proj', inF: d, outF: d },
    { name: 'fc1', inF: d, outF: 4 * d },
    { name: 'fc2', inF: 4 * d, outF: d },
  ];
  return linears.flatMap(({ name, inF, outF }) => [
    { label: `${name} y=xWᵀ`, m: ROWS, n: outF, k: inF, ta: N, tb: T },
    { label: `${name} dx=dyW`, m: ROWS, n: inF, k: outF, ta: N, tb: N },
    { label: `${name} dW=dyᵀx`, m: outF, n: inF, k: ROWS, ta: T, tb: N },
  ]);
}

interface WidthFigures {
  sgemmForwardMs: number;
  sgemmBackwardMs: number;
  sgemmGflops: number;
  forwardMs: number;
  forwardBackwardMs: number;
  forwardWallMs: number;
  forwardBackwardWallMs: number;
}

const samples = new Map<
  number,
  {
    sgemmForward: number[];
    sgemmBackward: number[];
    forward: number[];
    forwardBackward: number[];
    forwardWall: number[];
    forwardBackwardWall: number[];
  }
>();
const blocks = new Map<number, { block: TransformerBlock; x: tf.Tensor }>();
const buffers = new Map<number, Float32Array>();
for (const { d, heads } of widths) {
  blocks.set(d, { block: new TransformerBlock(d, heads), x: tf.randomNormal([1, ROWS, d]) });
  buffers.set(
    d,
    Float32Array.from({ length: 3 * 4 * d * d + 8 * ROWS * d }, (_, index) => ((index % 97) - 48) / 97),
  );
  samples.set(d, {
    sgemmForward: [],
    sgemmBackward: [],
    forward: [],
    forwardBackward: [],
    forwardWall: [],
    forwardBackwardWall: [],
  });
}

function runSgemms(d: number, forward: boolean): number {
  const memory = buffers.get(d)!;
  const weight = memory.subarray(0, 4 * d * d);
  const input = memory.subarray(4 * d * d, 4 * d * d + 4 * ROWS * d);
  const output = memory.subarray(8 * d * d, 8 * d * d + 4 * ROWS * d);
  const gradient = memory.subarray(12 * d * d - 4 * d * d, 12 * d * d);
  let flops = 0;
  for (const call of blockSgemms(d)) {
    const isForward = call.label.includes('y=');
    if (isForward !== forward) continue;
    const a = call.label.includes('dW') ? output : input;
    const b = call.label.includes('dW') ? input : weight;
    const c = call.label.includes('dW') ? gradient : output;
    const lda = call.ta === CBLAS_NO_TRANSPOSE ? call.k : call.m;
    const ldb = call.tb === CBLAS_NO_TRANSPOSE ? call.n : call.k;
    sgemm!(CBLAS_ROW_MAJOR, call.ta, call.tb, call.m, call.n, call.k, 1, a, lda, b, ldb, 0, c, call.n);
    flops += 2 * call.m * call.n * call.k;
  }
  return flops;
}

const flopsPerBlock = new Map<number, number>();
for (let repeat = 0; repeat < REPEATS + 1; repeat++) {
  for (const { d } of widths) {
    const figures = samples.get(d)!;
    let flops = 0;
    const sgemmForward = timed(() => {
      flops += runSgemms(d, true);
    });
    const sgemmBackward = timed(() => {
      flops += runSgemms(d, false);
    });
    flopsPerBlock.set(d, flops);
    const { block, x } = blocks.get(d)!;
    const forward = timed(() => tf.tidy(() => block.forward(x).dataSync()));
    const forwardBackward = timed(() => backward(block, () => block.forward(x).mean()));
    for (const parameter of block.parameters()) parameter.grad = null;
    if (repeat === 0) continue; // warm-up
    // CPU time: what the work costs, whatever else the machine runs (wall time in parentheses).
    figures.sgemmForward.push(sgemmForward.cpu);
    figures.sgemmBackward.push(sgemmBackward.cpu);
    figures.forward.push(forward.cpu);
    figures.forwardBackward.push(forwardBackward.cpu);
    figures.forwardWall.push(forward.wall);
    figures.forwardBackwardWall.push(forwardBackward.wall);
  }
}

const results = new Map<number, WidthFigures>();
for (const { d } of widths) {
  const figures = samples.get(d)!;
  const sgemmForwardMs = median(figures.sgemmForward);
  const sgemmBackwardMs = median(figures.sgemmBackward);
  results.set(d, {
    sgemmForwardMs,
    sgemmBackwardMs,
    sgemmGflops: flopsPerBlock.get(d)! / ((sgemmForwardMs + sgemmBackwardMs) / 1000) / 1e9,
    forwardMs: median(figures.forward),
    forwardBackwardMs: median(figures.forwardBackward),
    forwardWallMs: median(figures.forwardWall),
    forwardBackwardWallMs: median(figures.forwardBackwardWall),
  });
}

const load = os
  .loadavg()
  .map((value) => value.toFixed(1))
  .join(' ');
const lines = [
  `# Compute per block at the 100 M and 350 M widths (${new Date().toISOString()}, load ${load})`,
  '',
  `One process, wasm backend with the BLAS Linear kernel (OPENBLAS_NUM_THREADS=${process.env.OPENBLAS_NUM_THREADS ?? 'unset'}), batch 1 × ${ROWS}, median of ${REPEATS} interleaved repetitions, in CPU time (process.cpuUsage: robust to the machine's load; wall time in parentheses).`,
  '',
  '| width | sgemm forward CPU ms | sgemm backward CPU ms | sgemm GFLOP/CPU-s | block forward CPU ms (wall) | block forward + backward CPU ms (wall) | not sgemm, per block with recompute, CPU ms |',
  '| --- | --- | --- | --- | --- | --- | --- |',
];
for (const { d } of widths) {
  const r = results.get(d)!;
  // Under activation checkpointing a block runs forward, then forward again and backward.
  const withRecompute = r.forwardMs + r.forwardBackwardMs;
  const sgemmWithRecompute = 2 * r.sgemmForwardMs + r.sgemmBackwardMs;
  lines.push(
    `| ${d} | ${r.sgemmForwardMs.toFixed(1)} | ${r.sgemmBackwardMs.toFixed(1)} | ${r.sgemmGflops.toFixed(1)} | ${r.forwardMs.toFixed(1)} (${r.forwardWallMs.toFixed(1)}) | ${r.forwardBackwardMs.toFixed(1)} (${r.forwardBackwardWallMs.toFixed(1)}) | ${(withRecompute - sgemmWithRecompute).toFixed(1)} |`,
  );
}
const perStep = widths.map(({ model, d, layers }) => {
  const r = results.get(d)!;
  const block = r.forwardMs + r.forwardBackwardMs;
  const sgemm = 2 * r.sgemmForwardMs + r.sgemmBackwardMs;
  return { model, layers, compute: layers * block, sgemm: layers * sgemm, rest: layers * (block - sgemm) };
});
const [small, large] = perStep as [(typeof perStep)[number], (typeof perStep)[number]];
const growth = gptParameterCount(scaleModels['350M']) / gptParameterCount(scaleModels['100M']);
lines.push(
  '',
  `Blocks' compute per step with activation checkpointing (CPU time): ${small.model} ${small.layers} × block = ${(small.compute / 1000).toFixed(2)} s (sgemm ${(small.sgemm / 1000).toFixed(2)}, rest ${(small.rest / 1000).toFixed(2)}); ${large.model} ${(large.compute / 1000).toFixed(2)} s (sgemm ${(large.sgemm / 1000).toFixed(2)}, rest ${(large.rest / 1000).toFixed(2)}).`,
  `Ratio ${(large.compute / small.compute).toFixed(2)} for ×${growth.toFixed(2)} parameters: ${(large.compute / small.compute / growth).toFixed(2)} of linear (sgemm alone ${(large.sgemm / small.sgemm / growth).toFixed(2)}, the rest ${(large.rest / small.rest / growth).toFixed(2)}).`,
);
process.stdout.write(`${lines.join('\n')}\n`);
