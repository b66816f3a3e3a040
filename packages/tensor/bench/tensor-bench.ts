/**
 * Benchmark of @fsdp-ts/tensor on this machine: matMul GFLOP/s per backend, a training-shaped
 * matMul forward+backward against three plain forward matMuls, the bridge's copy speed next to a
 * plain copy of the same bytes, and bfloat16 conversion speed. Prints a table, writes JSON.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { blasSearchOrder, loadBlas } from '@fsdp-ts/kernels';
import {
  type BackendName,
  bfloat16ToFloat32,
  computeInfo,
  float32ToBfloat16,
  fromTf,
  initBackend,
  setNativeMatMul,
  TensorView,
  toTf,
} from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { startRun } from '../../../bench/internal/run-context';
import { formatRange, rate, type Summary, summarise, timeIt } from './statistics';
import { startTorchMatMul } from './torch-mat-mul';

const benchmarkRun = startRun();
const quick = process.argv.includes('--quick');
const repeats = quick ? 5 : 10;
const rows: { backend: string; measure: string; unit: string; value: Summary }[] = [];

function record(backend: string, measure: string, unit: string, value: Summary): void {
  rows.push({ backend, measure, unit, value });
  console.log(`${backend.padEnd(5)} ${measure.padEnd(44)} ${formatRange(value).padStart(26)} ${unit}`);
}

function matMulGflops(size: number): Summary {
  const a = tf.randomNormal([size, size]);
  const b = tf.randomNormal([size, size]);
  // Never return a typed array from tf.tidy: tidy walks its result looking for tensors.
  const time = timeIt(() => tf.tidy(() => void tf.matMul(a, b).dataSync()), repeats);
  tf.dispose([a, b]);
  return rate(time, (2 * size ** 3) / 1e9);
}

/** [tokens, in] x [in, out] forward plus both gradients, vs three plain forward matMuls of those shapes. */
function trainingShaped(
  tokens: number,
  inner: number,
  outer: number,
): { ratio: number; fused: Summary; plain: Summary } {
  const x = tf.randomNormal([tokens, inner]);
  const w = tf.randomNormal([inner, outer]);
  const dy = tf.randomNormal([tokens, outer]);
  const gradient = tf.grads((input: tf.Tensor, weight: tf.Tensor) => tf.matMul(input, weight));
  const fused = timeIt(
    () =>
      tf.tidy(() => {
        for (const g of gradient([x, w], dy)) g.dataSync();
      }),
    repeats,
  );
  const wt = tf.transpose(w);
  const xt = tf.transpose(x);
  const plain = timeIt(
    () =>
      tf.tidy(() => {
        tf.matMul(x, w).dataSync();
        tf.matMul(dy, wt).dataSync();
        tf.matMul(xt, dy).dataSync();
      }),
    repeats,
  );
  tf.dispose([x, w, dy, wt, xt]);
  const flops = (3 * 2 * tokens * inner * outer) / 1e9;
  return { ratio: plain.median / fused.median, fused: rate(fused, flops), plain: rate(plain, flops) };
}

/**
 * tf.matMul 1024² through the BLAS kernel, tfjs's own wasm kernel, and a direct cblas_sgemm on
 * plain Float32Arrays, interleaved (one call of each per round) so all three see the same load.
 * CPU time of this process per call (the machine is shared; wall time would measure the others).
 */
async function nativeAgainstDirect(): Promise<void> {
  await initBackend('wasm');
  const load = loadBlas(blasSearchOrder, { threads: 1 });
  if (!load.loaded || (await setNativeMatMul(true)).matMul !== 'blas') {
    console.log(`wasm  BLAS kernel vs direct sgemm: skipped (no BLAS library loaded)`);
    return;
  }
  const size = 1024;
  const a = tf.randomNormal([size, size]);
  const b = tf.randomNormal([size, size]);
  const left = a.dataSync() as Float32Array;
  const right = b.dataSync() as Float32Array;
  const out = new Float32Array(size * size);
  const cpuMs = (run: () => void) => {
    const start = process.cpuUsage();
    run();
    const used = process.cpuUsage(start);
    return (used.user + used.system) / 1000;
  };
  const torch = await startTorchMatMul();
  const samples = {
    kernel: [] as number[],
    wasm: [] as number[],
    direct: [] as number[],
    torch: [] as number[],
  };
  const rounds = quick ? 6 : 16;
  for (let round = 0; round < rounds + 2; round++) {
    const kernel = cpuMs(() => tf.matMul(a, b).dispose());
    const direct = cpuMs(() =>
      load.library.sgemm(101, 111, 111, size, size, size, 1, left, size, right, size, 0, out, size),
    );
    await setNativeMatMul(false);
    const wasm = cpuMs(() => tf.matMul(a, b).dispose());
    await setNativeMatMul(true);
    const peer = 'cpuMs' in torch ? await torch.cpuMs(size) : Number.NaN;
    if (round < 2) continue; // warm-up
    samples.torch.push(peer);
    samples.kernel.push(kernel);
    samples.direct.push(direct);
    samples.wasm.push(wasm);
  }
  tf.dispose([a, b]);
  const gigaflop = (2 * size ** 3) / 1e9;
  const kernel = rate(summarise(samples.kernel), gigaflop);
  const direct = rate(summarise(samples.direct), gigaflop);
  const wasm = rate(summarise(samples.wasm), gigaflop);
  record('wasm', `tf.matMul ${size}² via BLAS kernel (CPU time)`, 'GFLOP/s', kernel);
  record('blas', `direct cblas_sgemm ${size}² (CPU time)`, 'GFLOP/s', direct);
  record('wasm', `tf.matMul ${size}², tfjs wasm kernel (CPU time)`, 'GFLOP/s', wasm);
  if ('cpuMs' in torch) {
    torch.close();
    const peer = rate(summarise(samples.torch), gigaflop);
    record('torch', `torch.mm ${size}², 1 thread (CPU time)`, 'GFLOP/s', peer);
    console.log(`torch ${torch.description}`);
    console.log(
      `wasm  BLAS kernel / PyTorch = ${(kernel.median / peer.median).toFixed(2)}; tfjs wasm kernel / PyTorch = ${(wasm.median / peer.median).toFixed(2)}`,
    );
  } else {
    console.log(`torch PyTorch peer skipped: ${torch.skipped}`);
  }
  const ratio = kernel.median / direct.median;
  console.log(
    `wasm  BLAS kernel / direct sgemm = ${ratio.toFixed(2)} (target >= 0.85: ${ratio >= 0.85 ? 'met' : 'not met'}); BLAS kernel / wasm kernel = ${(kernel.median / wasm.median).toFixed(1)}`,
  );
  rows.push({
    backend: 'wasm',
    measure: 'BLAS kernel / direct sgemm, 1024²',
    unit: 'ratio',
    value: { min: ratio, median: ratio, max: ratio, samples: [] },
  });
}

async function benchmarkBackend(backend: BackendName): Promise<void> {
  await initBackend(backend);
  console.log(`${backend.padEnd(5)} ${computeInfo().summary}`);
  for (const size of [256, 512, 1024])
    record(backend, `matMul ${size}x${size}`, 'GFLOP/s', matMulGflops(size));
  const shaped = trainingShaped(1024, 256, 1024);
  record(backend, 'matMul fwd+bwd [1024,256]x[256,1024]', 'GFLOP/s', shaped.fused);
  record(backend, 'three plain fwd matMuls, same shapes', 'GFLOP/s', shaped.plain);
  console.log(
    `${backend.padEnd(5)} fwd+bwd throughput / plain throughput = ${shaped.ratio.toFixed(2)} (target >= 0.5)`,
  );
  rows.push({
    backend,
    measure: 'fwd+bwd / three plain',
    unit: 'ratio',
    value: { min: shaped.ratio, median: shaped.ratio, max: shaped.ratio, samples: [] },
  });

  const numel = 4 * 1024 * 1024;
  const view = TensorView.zeros([numel]);
  (view.typedArray() as Float32Array).fill(1.5);
  const gigabytes = (numel * 4) / 1e9;
  // toTf on cpu aliases the view (zero copy), so its time is independent of the size.
  record(
    backend,
    `toTf 16 MiB${backend === 'cpu' ? ' (zero copy)' : ''}`,
    'GB/s',
    rate(
      timeIt(() => toTf(view).dispose(), repeats),
      gigabytes,
    ),
  );
  const tensor = tf.ones([numel]);
  record(
    backend,
    'fromTf 16 MiB',
    'GB/s',
    rate(
      timeIt(() => fromTf(tensor, view), repeats),
      gigabytes,
    ),
  );
  tensor.dispose();
}

async function main(): Promise<void> {
  console.log(
    `fsdp-ts tensor benchmark — ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), shared and noisy; median (min–max); load average ${loadavg()
      .map((value) => value.toFixed(1))
      .join(' ')}\n`,
  );
  const numel = 4 * 1024 * 1024;
  const source = new Float32Array(numel).map((_, index) => Math.sin(index));
  const target = new Float32Array(numel);
  record(
    'js',
    'plain copy 16 MiB (Float32Array.set)',
    'GB/s',
    rate(
      timeIt(() => target.set(source), repeats),
      (numel * 4) / 1e9,
    ),
  );
  const words = new Uint16Array(numel);
  record(
    'js',
    'float32 -> bfloat16, 16 MiB of float32',
    'GB/s',
    rate(
      timeIt(() => float32ToBfloat16(source, words), repeats),
      (numel * 4) / 1e9,
    ),
  );
  record(
    'js',
    'bfloat16 -> float32, 16 MiB of float32',
    'GB/s',
    rate(
      timeIt(() => bfloat16ToFloat32(words, target), repeats),
      (numel * 4) / 1e9,
    ),
  );
  await nativeAgainstDirect();
  for (const backend of ['wasm', 'cpu'] as const) await benchmarkBackend(backend);
  const directory = join(process.cwd(), '..', '..', 'bench-results');
  mkdirSync(directory, { recursive: true });
  const file = join(directory, 'tensor.json');
  writeFileSync(
    file,
    `${JSON.stringify({ date: new Date().toISOString(), context: benchmarkRun.finish(), cores: cpus().length, rows }, null, 2)}\n`,
  );
  console.log(
    `\nload average at the end ${loadavg()
      .map((value) => value.toFixed(1))
      .join(' ')}; wrote ${file}`,
  );
}

await main();
