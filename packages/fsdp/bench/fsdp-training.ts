/**
 * `npm run bench:fsdp` (or `npm run bench -w @fsdp-ts/fsdp`): FSDP training throughput and memory
 * of the reference GPT, world size 2 over real processes (fsdp-run, tcp on loopback), wasm.
 *   - compute-bound: vocab 256, dModel 256, 4 layers, 4 heads, seqLen 128, batch 8 per rank;
 *   - communication-bound: the same model, batch 1, seqLen 16 per rank.
 * Rows: single process, no-shard (flat and unflattened), shard-grad-op, full-shard (flat,
 * unflattened, optimizer over the flat shards, optimizer per submodule). Memory: per-rank bytes of
 * parameters + gradients + optimizer state at W = 1, 2, 4 against the model
 * 16·P/N + 8·(units gathered at once)·(largest unit), and a 16-layer variant at W = 2.
 * Environment: BENCH_QUICK=1 for fewer steps; BENCH_ONLY=compute|communication|memory;
 * BENCH_KINDS=no-shard,full-shard,… to measure only some rows; BENCH_MEASURED_STEPS=n.
 * Prints tables and writes bench-results/fsdp-training.json at the repository root.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GPTConfig } from '@fsdp-ts/nn';
import type { RunKind, RunRequest, RunResult } from './bench-config';
import { checkTargets, memoryModelBytes } from './targets';

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
const settings = {
  compute: { batch: 8, seqLen: 128, warmupSteps: quick ? 1 : 2, measuredSteps: quick ? 10 : 15 },
  communication: { batch: 1, seqLen: 16, warmupSteps: quick ? 2 : 3, measuredSteps: quick ? 10 : 30 },
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
    process.stderr.write(
      `  ${result.kind.padEnd(31)} W=${worldSize}  ${result.tokensPerSecond.median.toFixed(0).padStart(7)} tok/s\n`,
    );
  }
  process.stderr.write(`  (${((performance.now() - started) / 1000).toFixed(0)} s)\n`);
  return results;
}

const throughputKinds: RunKind[] = [
  'single',
  'no-shard-unflat',
  'no-shard',
  'shard-grad-op',
  'full-shard-unflat',
  'full-shard',
  'full-shard-flat-optimizer',
  'full-shard-submodule-optimizer',
];

const throughput: Partial<Record<SettingName, Partial<Record<RunKind, RunResult>>>> = {};
for (const name of ['compute', 'communication'] as const) {
  if (only !== undefined && only !== name) continue;
  process.stderr.write(`${name}-bound setting\n`);
  const setting = settings[name];
  const config = { ...referenceConfig, seqLen: setting.seqLen };
  const rows: Partial<Record<RunKind, RunResult>> = {};
  const wanted = throughputKinds.filter((kind) => kindFilter === undefined || kindFilter.includes(kind));
  if (wanted.includes('single')) {
    const [single] = run(['single'], 1, { config, ...setting });
    if (single !== undefined) rows.single = single;
  }
  const distributed = wanted.filter((kind) => kind !== 'single');
  if (distributed.length > 0)
    for (const result of run(distributed, 2, { config, ...setting })) rows[result.kind] = result;
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
const note = `shared, noisy machine (${os.cpus().length} cores, load average ${os
  .loadavg()
  .map((value) => value.toFixed(1))
  .join(' ')}, several agents running in parallel): compare rows of one run, not runs`;
lines.push(`\n${note}`);
process.stdout.write(`${lines.join('\n')}\n`);

mkdirSync(join(repositoryRoot, 'bench-results'), { recursive: true });
writeFileSync(
  join(repositoryRoot, 'bench-results', 'fsdp-training.json'),
  `${JSON.stringify({ benchmark: 'fsdp-training', date: new Date().toISOString(), backend: 'wasm', note, quick, settings, referenceConfig, throughput, memory, targets, loadAverage: os.loadavg() }, null, 2)}\n`,
);
