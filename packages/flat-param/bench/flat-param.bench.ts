// Benchmark of @fsdp-ts/flat-param: view switching for a 400-parameter unit, and flattening 100 MB
// against a memcpy of the same bytes measured in the same run.
// Run: npm run bench -w @fsdp-ts/flat-param   (writes bench-results/flat-param.json at the repo root)
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FlatParamHandle } from '@fsdp-ts/flat-param';
import { Parameter, type TensorView } from '@fsdp-ts/tensor';
import { startRun } from '../../../bench/internal/run-context';

const benchmarkRun = startRun();
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

interface Stats {
  min: number;
  median: number;
  max: number;
}

function stats(samples: number[]): Stats {
  const sorted = [...samples].sort((first, second) => first - second);
  return { min: sorted[0]!, median: sorted[Math.floor(sorted.length / 2)]!, max: sorted[sorted.length - 1]! };
}

function time(run: () => void): number {
  const start = process.hrtime.bigint();
  run();
  return Number(process.hrtime.bigint() - start) / 1e6; // ms
}

/** 200 Linear layers with bias: 400 parameters, like PyTorch PR #96958's experiment. */
function linearLayers(layers: number, inFeatures: number, outFeatures: number): [string, Parameter][] {
  const named: [string, Parameter][] = [];
  for (let layer = 0; layer < layers; layer++) {
    const weight = Parameter.zeros([outFeatures, inFeatures]);
    weight.data.typedArray().fill(layer + 1);
    named.push([`layers.${layer}.weight`, weight], [`layers.${layer}.bias`, Parameter.zeros([outFeatures])]);
  }
  return named;
}

function benchSwitching(worldSize: number, rank: number, withGradients: boolean, iterations: number) {
  const handle = FlatParamHandle.create(linearLayers(200, 64, 64), { rank, worldSize });
  handle.unshardedBuffer();
  if (withGradients) {
    handle.unshardedGradBuffer();
    handle.setGradientsPresent(true);
  }
  const unshard: number[] = [];
  const reshard: number[] = [];
  for (let iteration = 0; iteration < iterations + 200; iteration++) {
    const toUnsharded = time(() => handle.useUnshardedViews());
    const toSharded = time(() => handle.useShardedViews());
    if (iteration >= 200) {
      unshard.push(toUnsharded);
      reshard.push(toSharded);
    }
  }
  return { parameters: handle.parameters.length, unshard: stats(unshard), reshard: stats(reshard) };
}

function benchFlatten(repeats: number) {
  // 200 × (500×250 + 250) float32 = 25.05 M elements = 100.2 MB.
  const named = linearLayers(200, 500, 250);
  const originals: TensorView[] = named.map(([, parameter]) => parameter.data);
  const sources = originals.map((view) => view.typedArray() as Float32Array);
  const numel = sources.reduce((sum, source) => sum + source.length, 0);
  const bytes = numel * 4;
  const warm = new Float32Array(new SharedArrayBuffer(bytes)).fill(1);
  const memcpyInto = (target: Float32Array) => {
    let offset = 0;
    for (const source of sources) {
      target.set(source, offset);
      offset += source.length;
    }
  };
  const flatten: number[] = [];
  const memcpyFresh: number[] = [];
  const memcpyWarm: number[] = [];
  for (let repeat = 0; repeat < repeats + 1; repeat++) {
    named.forEach(([, parameter], index) => {
      parameter.data = originals[index]!;
    });
    gc();
    const flattenMs = time(() => FlatParamHandle.create(named, { rank: 0, worldSize: 1 }));
    gc();
    const freshMs = time(() => memcpyInto(new Float32Array(new SharedArrayBuffer(bytes))));
    const warmMs = time(() => memcpyInto(warm));
    if (repeat > 0) {
      flatten.push(flattenMs);
      memcpyFresh.push(freshMs);
      memcpyWarm.push(warmMs);
    }
  }
  const bandwidth = (samples: number[]) => {
    const { min, median, max } = stats(samples);
    return { min: bytes / max / 1e6, median: bytes / median / 1e6, max: bytes / min / 1e6 }; // GB/s
  };
  return {
    bytes,
    flattenMs: stats(flatten),
    memcpyFreshMs: stats(memcpyFresh),
    memcpyWarmMs: stats(memcpyWarm),
    flattenGBps: bandwidth(flatten),
    memcpyFreshGBps: bandwidth(memcpyFresh),
    memcpyWarmGBps: bandwidth(memcpyWarm),
    ratioToFreshMemcpy: stats(memcpyFresh).median / stats(flatten).median,
    ratioToWarmMemcpy: stats(memcpyWarm).median / stats(flatten).median,
  };
}

/** What re-allocating the unsharded buffer on every unshard costs (first touch), vs keeping it. */
function benchUnshardMemory(iterations: number) {
  const handle = FlatParamHandle.create(linearLayers(200, 64, 64), { rank: 0, worldSize: 1 });
  const shard = handle.shardedBuffer().typedArray();
  const reallocated: number[] = [];
  const kept: number[] = [];
  for (let iteration = 0; iteration < iterations + 1; iteration++) {
    // The all-gather output write, done here as one local copy (world size 1).
    const freshMs = time(() => {
      handle.freeUnsharded();
      handle.unshardedBuffer().typedArray().set(shard);
    });
    const keptMs = time(() => handle.unshardedBuffer().typedArray().set(shard));
    if (iteration > 0) {
      reallocated.push(freshMs);
      kept.push(keptMs);
    }
  }
  return { bytes: shard.byteLength, reallocatedMs: stats(reallocated), keptMs: stats(kept) };
}

const format = ({ min, median, max }: Stats, digits = 4) =>
  `${min.toFixed(digits)} / ${median.toFixed(digits)} / ${max.toFixed(digits)}`;

const switching = [
  { case: 'world 1, data only', ...benchSwitching(1, 0, false, 2000) },
  { case: 'world 8 rank 3, data only', ...benchSwitching(8, 3, false, 2000) },
  { case: 'world 8 rank 3, data + grad', ...benchSwitching(8, 3, true, 2000) },
];
const flatten = benchFlatten(7);
const unshardMemory = benchUnshardMemory(50);

console.log('Machine shared with other agents while measuring: figures are noisy.');
console.log(
  '\nView switching, 400 parameters (200 × Linear 64×64 + bias), ms, min / median / max (target ≤ 0.5)',
);
console.log('| case | useUnshardedViews() | useShardedViews() |\n| --- | --- | --- |');
for (const row of switching) console.log(`| ${row.case} | ${format(row.unshard)} | ${format(row.reshard)} |`);
console.log(
  `\nFlattening ${(flatten.bytes / 1e6).toFixed(1)} MB (400 parameters, world 1), min / median / max`,
);
console.log('| operation | ms | GB/s |\n| --- | --- | --- |');
console.log(
  `| FlatParamHandle.create | ${format(flatten.flattenMs, 1)} | ${format(flatten.flattenGBps, 2)} |`,
);
console.log(
  `| memcpy into a fresh SharedArrayBuffer | ${format(flatten.memcpyFreshMs, 1)} | ${format(flatten.memcpyFreshGBps, 2)} |`,
);
console.log(
  `| memcpy into a warm buffer | ${format(flatten.memcpyWarmMs, 1)} | ${format(flatten.memcpyWarmGBps, 2)} |`,
);
console.log(
  `flatten / memcpy bandwidth (medians): ${(100 * flatten.ratioToFreshMemcpy).toFixed(0)}% of fresh, ${(100 * flatten.ratioToWarmMemcpy).toFixed(0)}% of warm (target ≥ 50%)`,
);
console.log(
  `\nFilling the unsharded buffer (${(unshardMemory.bytes / 1e6).toFixed(1)} MB), ms min / median / max: freed and re-allocated ${format(unshardMemory.reallocatedMs, 2)}; kept allocated ${format(unshardMemory.keptMs, 2)}`,
);

const output = join(root, 'bench-results', 'flat-param.json');
mkdirSync(dirname(output), { recursive: true });
writeFileSync(
  output,
  `${JSON.stringify(
    {
      date: new Date().toISOString(),
      context: benchmarkRun.finish(),
      node: process.version,
      cpus: `${availableParallelism()} × ${cpus()[0]?.model ?? 'unknown'}`,
      note: 'machine shared with other agents while measuring',
      switching,
      flatten,
      unshardMemory,
    },
    null,
    2,
  )}\n`,
);
console.log(`\nwrote ${output}`);
