/**
 * tfjs-layers Dense on the cpu backend: the BLAS `_FusedMatMul` against tfjs's own `_FusedMatMul`
 * (what ran before it existed; BatchMatMul is the BLAS one in both), in one process, interleaved
 * (ABAB), in CPU seconds. The model is examples/layers-mnist-like's compute-bound MLP
 * (784 → 1024 relu → 1024 relu → 10 softmax) on a batch of 1024:
 * - predict: every Dense runs `_FusedMatMul` (tfjs fuses the activation outside a tape);
 * - trainOnBatch: under a tape tfjs fuses only 'linear', so only the softmax layer's matMul
 *   runs `_FusedMatMul` and the relu layers run BatchMatMul (already BLAS before).
 * Run: `npm run bench:dense -w @fsdp-ts/tensor`.
 */
import { cpus, loadavg } from 'node:os';
import { computeInfo, initBackend, setNativeMatMul } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import * as layers from '@tensorflow/tfjs-layers';
import { formatRange, summarise } from './statistics';

const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const batch = Number(process.env.BENCH_BATCH ?? 1024);
const load = () =>
  `load average ${loadavg()
    .map((value) => value.toFixed(2))
    .join(', ')} on ${cpus().length} cores`;

await initBackend('cpu');
await setNativeMatMul(false);
const backendFused = tf.getKernel('_FusedMatMul', 'cpu')!;
await setNativeMatMul(true);
const blasFused = tf.getKernel('_FusedMatMul', 'cpu')!;
if (computeInfo().matMul !== 'blas') {
  console.log(`no BLAS kernel here (${computeInfo().reason}): nothing to compare`);
  process.exit(0);
}
/** Which `_FusedMatMul` the cpu backend runs; BatchMatMul stays the BLAS one. */
function useFused(config: tf.KernelConfig): void {
  tf.unregisterKernel('_FusedMatMul', 'cpu');
  tf.registerKernel(config);
}

const model = layers.sequential({
  layers: [
    layers.layers.dense({ units: 1024, activation: 'relu', inputShape: [784] }),
    layers.layers.dense({ units: 1024, activation: 'relu' }),
    layers.layers.dense({ units: 10, activation: 'softmax' }),
  ],
});
model.compile({ optimizer: 'adam', loss: 'categoricalCrossentropy' });
const x = tf.randomNormal([batch, 784]);
const y = tf.tidy(() => tf.oneHot(tf.randomUniform([batch], 0, 10, 'int32'), 10));

function cpuSeconds(run: () => unknown): number {
  const start = process.cpuUsage();
  run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}
const predict = () => tf.dispose(model.predict(x) as tf.Tensor);
async function train(): Promise<number> {
  const start = process.cpuUsage();
  await model.trainOnBatch(x, y);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}

const sides = { backend: backendFused, blas: blasFused } as const;
const predictSeconds = { backend: [] as number[], blas: [] as number[] };
const trainSeconds = { backend: [] as number[], blas: [] as number[] };
for (const side of ['backend', 'blas'] as const) {
  useFused(sides[side]);
  predict();
  await train();
}
console.log(
  `# tfjs-layers Dense MLP 784-1024-1024-10, batch ${batch}, cpu backend, ${computeInfo().summary}; ${rounds} interleaved rounds; ${load()}`,
);
for (let round = 0; round < rounds; round++) {
  const order = round % 2 === 0 ? (['backend', 'blas'] as const) : (['blas', 'backend'] as const);
  for (const side of order) {
    useFused(sides[side]);
    predictSeconds[side].push(cpuSeconds(predict));
    trainSeconds[side].push(await train());
  }
  console.log(
    `round ${round + 1}: predict CPU s tfjs ${predictSeconds.backend.at(-1)!.toFixed(3)} / BLAS ${predictSeconds.blas.at(-1)!.toFixed(3)}; trainOnBatch tfjs ${trainSeconds.backend.at(-1)!.toFixed(3)} / BLAS ${trainSeconds.blas.at(-1)!.toFixed(3)}; ${load()}`,
  );
}
useFused(blasFused);
const ratios = (seconds: { backend: number[]; blas: number[] }) =>
  summarise(seconds.backend.map((value, index) => value / seconds.blas[index]!));
const predictRatio = ratios(predictSeconds);
const trainRatio = ratios(trainSeconds);
console.log(
  `\n| step | tfjs _FusedMatMul CPU s | BLAS _FusedMatMul CPU s | speed-up (per round) |\n| --- | --- | --- | --- |`,
);
console.log(
  `| predict | ${formatRange(summarise(predictSeconds.backend), 3)} | ${formatRange(summarise(predictSeconds.blas), 3)} | ${formatRange(predictRatio)} |`,
);
console.log(
  `| trainOnBatch | ${formatRange(summarise(trainSeconds.backend), 3)} | ${formatRange(summarise(trainSeconds.blas), 3)} | ${formatRange(trainRatio)} |`,
);
const verdict = (met: boolean) => (met ? 'met' : 'not met');
console.log(
  `\ntarget predict ≥ 2x faster with the BLAS _FusedMatMul (median ${predictRatio.median.toFixed(2)}): ${verdict(predictRatio.median >= 2)}`,
);
console.log(
  `target trainOnBatch not slower (median ${trainRatio.median.toFixed(2)} ≥ 0.95): ${verdict(trainRatio.median >= 0.95)}`,
);
console.log(`${load()}`);
tf.dispose([x, y]);
