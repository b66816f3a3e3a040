/**
 * `npm run bench`: samples/s of single-process model.fit vs ShardedTrainer on 2 thread ranks (shm),
 * interleaved ABAB, and the bytes each rank holds for training under every strategy against the
 * model (replicate 16P, shard-optimizer 8P + 8P/N, shard-gradients 4P + 12P/N).
 */
import { execSync } from 'node:child_process';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { initBackend } from '@fsdp-ts/tensor';
import type { BenchArguments, BenchRankResult } from './bench-rank';
import { makeDigits } from './digits';
import { buildModel } from './model';

const samples = Number(process.env.BENCH_SAMPLES ?? 512);
const batchSize = Number(process.env.BENCH_BATCH ?? 64);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const rankModule = new URL('./bench-rank.ts', import.meta.url);

async function single(): Promise<number> {
  const model = buildModel();
  const { x, y } = makeDigits(samples, 1);
  await model.fit(x, y, { batchSize, epochs: 1, verbose: 0 });
  const started = performance.now();
  await model.fit(x, y, { batchSize, epochs: 1, verbose: 0 });
  return samples / ((performance.now() - started) / 1000);
}

async function sharded(strategy: BenchArguments['strategy']): Promise<BenchRankResult[]> {
  const args: BenchArguments = { strategy, samples, batchSize };
  return (await spawnThreadRanks(2, rankModule, 'benchRank', {
    args,
    timeoutMs: 1_800_000,
  })) as BenchRankResult[];
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const load = () => execSync('uptime').toString().trim();

await initBackend('cpu');
console.log(`# ${samples} samples, global batch ${batchSize}, cpu backend; ${load()}`);
const singleRates: number[] = [];
const shardedRates: number[] = [];
const ratios: number[] = [];
for (let round = 0; round < rounds; round++) {
  const a = await single();
  const b = Math.min(...(await sharded('shard-gradients')).map((result) => result.samplesPerSecond));
  singleRates.push(a);
  shardedRates.push(b);
  ratios.push(b / a);
  console.log(
    `round ${round + 1}: single ${a.toFixed(1)} samples/s, W=2 ${b.toFixed(1)} samples/s, ratio ${(b / a).toFixed(2)}; ${load()}`,
  );
}
const range = (values: number[]) =>
  `${median(values).toFixed(2)} (${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)})`;
if (rounds > 0) {
  console.log(`\n| run | samples/s median (min–max) |\n| --- | --- |`);
  console.log(`| model.fit, 1 process | ${range(singleRates)} |`);
  console.log(`| ShardedTrainer shard-gradients, 2 thread ranks | ${range(shardedRates)} |`);
  console.log(`| ratio W=2 / single | ${range(ratios)} |`);
}

console.log(
  '\n| strategy (W=2) | weights | flat buffers | optimizer state | total per rank | model | total / model |\n| --- | --- | --- | --- | --- | --- | --- |',
);
for (const strategy of ['replicate', 'shard-optimizer', 'shard-gradients'] as const) {
  const [rank0] = await sharded(strategy);
  const P = rank0!.trainableParameters;
  const model = {
    replicate: 16 * P,
    'shard-optimizer': 8 * P + (8 * P) / 2,
    'shard-gradients': 4 * P + (12 * P) / 2,
  }[strategy];
  const { weights, flatBuffers, optimizerState, total } = rank0!.memory;
  const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
  console.log(
    `| ${strategy} | ${kib(weights)} | ${kib(flatBuffers)} | ${kib(optimizerState)} | ${kib(total)} | ${kib(model)} | ${(total / model).toFixed(3)} |`,
  );
}
console.log(`\n${load()}`);
