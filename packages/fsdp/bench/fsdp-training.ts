/**
 * `npm run bench:fsdp` (or `npm run bench -w @fsdp-ts/fsdp`): FSDP training throughput and memory
 * of the reference GPT, world size 2 over real processes (fsdp-run, tcp on loopback), wasm.
 *   - compute-bound: vocab 256, dModel 256, 4 layers, 4 heads, seqLen 128, batch 8 per rank;
 *   - communication-bound: the same model, batch 1, seqLen 16 per rank.
 * Rows: single process, no-shard (flat and unflattened), shard-grad-op, full-shard (flat,
 * unflattened, optimizer over the flat shards, optimizer per submodule). Memory: per-rank bytes of
 * parameters + gradients + optimizer state at W = 1, 2, 4 against the model
 * 16·P/N + 8·(units gathered at once)·(largest unit), and a 16-layer variant at W = 2.
 * PyTorch 1.13 peers (torch-fsdp-training.py, one thread per rank, gloo): single process, DDP and
 * FSDP at W=2, when /usr/bin/python3 imports torch.
 * Noise: the rows of one launch run their steps interleaved (ABAB, see training-rank.ts), and the
 * whole set runs BENCH_ROUNDS times (default 2; ours then PyTorch's, then the other way round),
 * pooling every measured step, so one noisy minute does not decide a ratio.
 * Environment: BENCH_QUICK=1 for fewer steps; BENCH_ONLY=compute|communication|memory;
 * BENCH_KINDS=no-shard,full-shard,torch-fsdp,… to measure only some rows; BENCH_MEASURED_STEPS=n
 * (per round); BENCH_ROUNDS=n; BENCH_CPU_PROFILE=dir (V8 profiles per rank); BENCH_PHASES=0|1 (the
 * per-phase CPU table: on by default for the compute-bound rows only, see [Note: phase profile]).
 * The 'two-singles' row is the ceiling of every two-rank row: two unwrapped single-process steps
 * at once in the W=2 launch, never communicating (interleaved with the other rows).
 * Prints tables and writes bench-results/fsdp-training.json at the repository root.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GPTConfig } from '@fsdp-ts/nn';
import { startRun } from '../../../bench/internal/run-context';
import type { RunKind, RunRequest, RunResult } from './bench-config';
import { phaseTable, poolPhases } from './phase-table';
import { ceilingLines, checkIssue15Targets, checkTargets, memoryModelBytes } from './targets';
import { runTorch, type TorchMode, torchResult, torchUnavailableReason } from './torch-peer';

const benchmarkRun = startRun();
const quick = process.env.BENCH_QUICK === '1';
const only = process.env.BENCH_ONLY;
const repositoryRoot = fileURLToPath(new URL('../../../', import.meta.url));
const launcher = join(
  dirname(createRequire(import.meta.url).resolve('@fsdp-ts/collectives/package.json')),
  'src/bin/fsdp-run.ts',
);
const rankScript = fileURLToPath(new URL('./training-rank.ts', import.meta.url));
const scratch = mkdtempSync(join(os.tmpdir(), 'fsdp-bench-'));
const nodeArguments = ['--conditions=@fsdp-ts/source', '--import', 'tsx'];

export const referenceConfig: GPTConfig = {
  vocabSize: 256,
  dModel: 256,
  nLayers: 4,
  nHeads: 4,
  seqLen: 128,
  seed: 0,
};
const measuredOverride =
  process.env.BENCH_MEASURED_STEPS === undefined ? undefined : Number(process.env.BENCH_MEASURED_STEPS);
const kindFilter = process.env.BENCH_KINDS?.split(',');
const rounds = Number(process.env.BENCH_ROUNDS ?? (quick ? 1 : 2));
// Measured steps per round.
// The phase profile (~20 µs per phase boundary) is on for the compute-bound steps (~600 ms) unless
// BENCH_PHASES=0, and for the communication-bound ones (~60 ms, beside PyTorch rows that have none)
// only with BENCH_PHASES=1.
const phasesSetting = process.env.BENCH_PHASES;
const settings = {
  compute: {
    batch: 8,
    seqLen: 128,
    warmupSteps: quick ? 1 : 2,
    measuredSteps: quick ? 6 : 8,
    profilePhases: phasesSetting !== '0',
  },
  communication: {
    batch: 1,
    seqLen: 16,
    warmupSteps: quick ? 2 : 3,
    // ~90 ms steps whose wall time spreads 2x (two ranks and their communication threads share two
    // cores): 60 per round, so the median of a row moves by less than the 3% a ratio is judged on.
    measuredSteps: quick ? 20 : 60,
    profilePhases: phasesSetting === '1',
  },
};
if (measuredOverride !== undefined)
  for (const setting of Object.values(settings)) setting.measuredSteps = measuredOverride;
type SettingName = keyof typeof settings;

let runCounter = 0;
/** Runs `kinds` one after another in one launch of `worldSize` processes (one plain process for 'single'). */
function run(kinds: RunKind[], worldSize: number, setting: Omit<RunRequest, 'kind' | 'output'>): RunResult[] {
  const requests: RunRequest[] = kinds.map((kind) => ({
    kind,
    output: join(scratch, `run-${runCounter++}.json`),
    ...setting,
  }));
  const command =
    worldSize === 1 && kinds.every((kind) => kind === 'single')
      ? [...nodeArguments, rankScript, JSON.stringify(requests)]
      : [
          ...nodeArguments,
          launcher,
          '--nproc-per-node',
          String(worldSize),
          rankScript,
          JSON.stringify(requests),
        ];
  const started = performance.now();
  const child = spawnSync(process.execPath, command, {
    encoding: 'utf8',
    timeout: 900_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (child.status !== 0)
    throw new Error(
      `benchmark runs ${kinds.join(', ')} (W=${worldSize}) failed:\n${child.stdout}\n${child.stderr}`,
    );
  const results = requests.map((request) => JSON.parse(readFileSync(request.output, 'utf8')) as RunResult);
  for (const result of results) {
    const pool =
      result.storagePool === undefined
        ? ''
        : `  (pooled buffers in measured steps: ${result.storagePool.reused} reused, ${result.storagePool.fresh} fresh)`;
    process.stderr.write(
      `  ${result.kind.padEnd(31)} W=${worldSize}  ${result.tokensPerSecond.median.toFixed(0).padStart(7)} tok/s${pool}\n`,
    );
  }
  process.stderr.write(`  (${((performance.now() - started) / 1000).toFixed(0)} s)\n`);
  return results;
}

const throughputKinds: RunKind[] = [
  'single',
  'two-singles',
  'no-shard-unflat',
  'no-shard',
  'shard-grad-op',
  'full-shard-unflat',
  'full-shard',
  'full-shard-recompute',
  'full-shard-flat-optimizer',
  'full-shard-submodule-optimizer',
  'torch-single',
  'torch-ddp',
  'torch-fsdp',
];
const torchSkipped = torchUnavailableReason();
if (torchSkipped !== null) process.stderr.write(`PyTorch rows skipped: ${torchSkipped}\n`);

/** Pools the measured steps of several rounds of one row. */
function pool(results: RunResult[]): RunResult {
  const first = results[0]!;
  const stepSamples = results.flatMap((result) => result.stepSamples);
  const cpuSamples = results.flatMap((result) => result.cpuSamples);
  const tokensPerRank = (first.tokensPerSecond.median * first.stepMs.median) / 1000 / first.worldSize;
  const pooled = torchResult(first.kind, first.worldSize, stepSamples, cpuSamples, tokensPerRank);
  const phases = first.phases === undefined ? undefined : poolPhases(results.map((result) => result.phases!));
  const allGather = results.map((result) => result.allGatherWaitMs.median);
  const reduction = results.map((result) => result.reductionWaitMs.median);
  return {
    ...first,
    tokensPerSecond: pooled.tokensPerSecond,
    stepMs: pooled.stepMs,
    stepSamples,
    cpuSamples,
    ...(phases === undefined ? {} : { phases }),
    cpuMs: pooled.cpuMs,
    allGatherWaitMs: {
      ...first.allGatherWaitMs,
      median: allGather.sort((a, b) => a - b)[allGather.length >> 1]!,
    },
    reductionWaitMs: {
      ...first.reductionWaitMs,
      median: reduction.sort((a, b) => a - b)[reduction.length >> 1]!,
    },
  };
}

const throughput: Partial<Record<SettingName, Partial<Record<RunKind, RunResult>>>> = {};
for (const name of ['compute', 'communication'] as const) {
  if (only !== undefined && only !== name) continue;
  process.stderr.write(`${name}-bound setting (${rounds} rounds)\n`);
  const setting = settings[name];
  const config = { ...referenceConfig, seqLen: setting.seqLen };
  const collected: Partial<Record<RunKind, RunResult[]>> = {};
  const keep = (result: RunResult) => {
    const list = collected[result.kind] ?? [];
    list.push(result);
    collected[result.kind] = list;
  };
  const wanted = throughputKinds.filter((kind) => kindFilter === undefined || kindFilter.includes(kind));
  const ours = () => {
    if (wanted.includes('single'))
      for (const result of run(['single'], 1, { config, ...setting })) keep(result);
    const distributed = wanted.filter((kind) => kind !== 'single' && !kind.startsWith('torch-'));
    if (distributed.length > 0)
      for (const result of run(distributed, 2, { config, ...setting })) keep(result);
  };
  const theirs = () => {
    if (torchSkipped !== null) return;
    for (const kind of wanted.filter((candidate) => candidate.startsWith('torch-'))) {
      const started = performance.now();
      const result = runTorch(kind.slice('torch-'.length) as TorchMode, config, setting, 2);
      process.stderr.write(
        `  ${kind.padEnd(31)} W=${result.worldSize}  ${result.tokensPerSecond.median.toFixed(0).padStart(7)} tok/s  (${((performance.now() - started) / 1000).toFixed(0)} s)\n`,
      );
      keep(result);
    }
  };
  for (let round = 0; round < rounds; round++) {
    if (round % 2 === 0) {
      ours();
      theirs();
    } else {
      theirs();
      ours();
    }
  }
  const rows: Partial<Record<RunKind, RunResult>> = {};
  for (const kind of throughputKinds) {
    const results = collected[kind];
    if (results !== undefined) rows[kind] = pool(results);
  }
  throughput[name] = rows;
}

interface MemoryRow {
  layers: number;
  kind: RunKind;
  worldSize: number;
  measuredBytes: number;
  modelBytes: number;
  tfPeakBytes: number;
  parameters: number;
  largestUnitNumel: number;
}
const memory: MemoryRow[] = [];
if (only === undefined || only === 'memory') {
  process.stderr.write('memory (communication-bound batch, so activations stay small)\n');
  const memoryRuns: [number, number][] = [
    [4, 1],
    [4, 2],
    [4, 4],
    [16, 2],
  ];
  for (const [layers, worldSize] of memoryRuns) {
    const config = { ...referenceConfig, nLayers: layers, seqLen: 16 };
    const results = run(['no-shard', 'full-shard'], worldSize, {
      config,
      batch: 1,
      seqLen: 16,
      warmupSteps: 1,
      measuredSteps: 2,
    });
    for (const result of results) {
      memory.push({
        layers,
        kind: result.kind,
        worldSize,
        measuredBytes: result.peak.parametersGradientsOptimizerBytes,
        modelBytes: memoryModelBytes(result.kind, result.parameters, worldSize, result.largestUnitNumel),
        tfPeakBytes: result.peak.tfBytes,
        parameters: result.parameters,
        largestUnitNumel: result.largestUnitNumel,
      });
    }
  }
}

const megabytes = (bytes: number) => (bytes / 2 ** 20).toFixed(2);
const lines: string[] = [];
for (const [name, rows] of Object.entries(throughput)) {
  lines.push(
    `\n${name}-bound (${settings[name as SettingName].batch} × ${settings[name as SettingName].seqLen} tokens per rank per step)`,
  );
  lines.push(
    '| run | W | tokens/s median (min–max) | step ms median | CPU ms/step (rank 0) | all-gather wait ms | reduction wait ms | peak params+grads+optim MiB | peak tfjs MiB |',
  );
  lines.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const row of Object.values(rows)) {
    lines.push(
      `| ${row.kind} | ${row.worldSize} | ${row.tokensPerSecond.median.toFixed(0)} (${row.tokensPerSecond.min.toFixed(0)}–${row.tokensPerSecond.max.toFixed(0)}) | ${row.stepMs.median.toFixed(0)} | ${row.cpuMs.median.toFixed(0)} | ${row.allGatherWaitMs.median.toFixed(1)} | ${row.reductionWaitMs.median.toFixed(1)} | ${megabytes(row.peak.parametersGradientsOptimizerBytes)} | ${megabytes(row.peak.tfBytes)} |`,
    );
  }
}
for (const [name, rows] of Object.entries(throughput)) {
  const profiled = Object.values(rows).filter((row) => row.phases !== undefined);
  if (profiled.length === 0) continue;
  lines.push(
    `\n${name}-bound, rank 0's CPU ms per step by phase and thread (medians; see [Note: phase profile] in bench/phase-profile.ts)`,
  );
  lines.push(...phaseTable(profiled));
}
if (memory.length > 0) {
  lines.push('\nmemory per rank (parameters + gradients + optimizer state, peak of a step)');
  lines.push('| layers | strategy | W | measured MiB | model MiB | measured / model | peak tfjs MiB |');
  lines.push('| --- | --- | --- | --- | --- | --- | --- |');
  for (const row of memory) {
    lines.push(
      `| ${row.layers} | ${row.kind} | ${row.worldSize} | ${megabytes(row.measuredBytes)} | ${megabytes(row.modelBytes)} | ${(row.measuredBytes / row.modelBytes).toFixed(3)} | ${megabytes(row.tfPeakBytes)} |`,
    );
  }
}
const targets = checkTargets(throughput, memory);
lines.push('\ntargets (issue 7 and the seed table of issue 10)');
for (const target of targets)
  lines.push(`- [${target.met ? 'met' : 'NOT met'}] ${target.name}: ${target.detail}`);
const issue15 = checkIssue15Targets(throughput);
lines.push('\ntargets of issue 15 (the runtime at the speed of its data)');
for (const target of issue15)
  lines.push(
    `- [${target.met === null ? 'not measured here' : target.met ? 'met' : 'NOT met'}] ${target.name}: ${target.detail}`,
  );
lines.push(...ceilingLines(throughput.compute));
if (torchSkipped !== null) lines.push(`(PyTorch rows skipped: ${torchSkipped})`);
const note = `shared, noisy machine (${os.cpus().length} cores, load average ${os
  .loadavg()
  .map((value) => value.toFixed(1))
  .join(' ')}, several agents running in parallel): compare rows of one run, not runs`;
lines.push(`\n${note}`);
process.stdout.write(`${lines.join('\n')}\n`);

mkdirSync(join(repositoryRoot, 'bench-results'), { recursive: true });
writeFileSync(
  join(repositoryRoot, 'bench-results', 'fsdp-training.json'),
  `${JSON.stringify({ benchmark: 'fsdp-training', date: new Date().toISOString(), context: benchmarkRun.finish(), backend: 'wasm', note, quick, rounds, settings, referenceConfig, throughput, memory, targets, issue15, loadAverage: os.loadavg() }, null, 2)}\n`,
);
