/**
 * `npm run bench:scale`: how every cost grows with model size and world size. GPT-2 shapes of
 * about 10 M, 100 M, 350 M and 1.3 B parameters (scale-config.ts), batch 1 × 64 per rank, AdamW,
 * one TransformerBlock per unit, wasm; single process, no-shard and full-shard at W = 1, 2, 4
 * through fsdp-run (tcp on loopback), some rows under `fsdp-run --memory-per-rank`.
 *
 * For every run: peak memory per rank (the launcher's cgroup peak when capped, else the rank's
 * peak RSS) next to FSDP's estimate and the runtime's own RSS, wrap time, step time split into
 * compute / all-gather wait / reduce-scatter wait / optimizer, checkpoint save and load against
 * the disk's sequential write rate measured in the same run, and launch-to-first-step time.
 * A run predicted not to fit in the machine's free memory is skipped with the prediction, never
 * started; a capped run predicted to exceed its cap runs only when it is the row that shows it.
 *
 * Environment: BENCH_SCALE_MODELS=10M,100M,350M (default 10M,100M,350M; 1.3B only when named),
 * BENCH_SCALE_ONLY=350M/full-shard/4/cap,100M/full-shard/4 to run only those rows,
 * BENCH_SCALE_FORCE=1 to run capped rows predicted to exceed their cap, BENCH_SCALE_CAP=2G to
 * cap every row (rows keep their own cap where they have one),
 * BENCH_SCALE_STEPS=n measured steps (default 3), BENCH_SCALE_CHECKPOINT=0 to skip checkpoints.
 * Writes bench-results/scale.json, scale.md and scale-memory.svg at the repository root.
 */
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { estimateMemoryPerRank } from '@fsdp-ts/fsdp';
import {
  gptParameterCount,
  gptUnitSizes,
  type ScaleModelName,
  type ScaleRankResult,
  type ScaleRunRequest,
  type ScaleStrategy,
  scaleModels,
} from './scale-config';
import { memoryPlot } from './scale-plot';

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
const repositoryRoot = fileURLToPath(new URL('../../../../', import.meta.url));
const launcher = join(
  dirname(createRequire(import.meta.url).resolve('@fsdp-ts/collectives/package.json')),
  'src/bin/fsdp-run.ts',
);
const rankScript = fileURLToPath(new URL('./scale-rank.ts', import.meta.url));
const nodeArguments = ['--conditions=@fsdp-ts/source', '--import', 'tsx'];
const scratch = mkdtempSync(join(os.tmpdir(), 'fsdp-scale-'));
const models = (process.env.BENCH_SCALE_MODELS ?? '10M,100M,350M').split(',') as ScaleModelName[];
const measuredSteps = Number(process.env.BENCH_SCALE_STEPS ?? 3);
const withCheckpoints = process.env.BENCH_SCALE_CHECKPOINT !== '0';
/** RSS of a rank before any model (Node, tfjs, the wasm module); replaced by the first run's measurement. */
let runtimeBytes = 300 * MiB;

interface PlannedRun {
  model: ScaleModelName;
  strategy: ScaleStrategy;
  worldSize: number;
  capBytes?: number;
  /** The row exists to show that this cap cannot hold the model: run it even though predicted to fail. */
  showsFailure?: boolean;
}

function plan(): PlannedRun[] {
  const runs: PlannedRun[] = [];
  for (const model of models) {
    runs.push({ model, strategy: 'single', worldSize: 1 });
    for (const worldSize of [2, 4]) runs.push({ model, strategy: 'no-shard', worldSize });
    for (const worldSize of [1, 2, 4]) runs.push({ model, strategy: 'full-shard', worldSize });
  }
  if (models.includes('350M')) {
    runs.push({ model: '350M', strategy: 'single', worldSize: 1, capBytes: 2 * GiB, showsFailure: true });
    runs.push({ model: '350M', strategy: 'full-shard', worldSize: 4, capBytes: 2 * GiB });
  }
  if (models.includes('1.3B'))
    runs.push({ model: '1.3B', strategy: 'full-shard', worldSize: 4, capBytes: 6 * GiB });
  const cap = process.env.BENCH_SCALE_CAP;
  if (cap !== undefined)
    for (const run of runs)
      run.capBytes ??= Number.parseFloat(cap) * (/g/i.test(cap) ? GiB : /m/i.test(cap) ? MiB : 1);
  const only = process.env.BENCH_SCALE_ONLY?.split(',');
  return only === undefined ? runs : runs.filter((run) => only.includes(runKey(run)));
}

/** '350M/full-shard/4' or '350M/full-shard/4/cap'. */
function runKey(run: PlannedRun): string {
  return `${run.model}/${run.strategy}/${run.worldSize}${run.capBytes === undefined ? '' : '/cap'}`;
}

/** Predicted peak bytes per rank: the runtime, plus the larger of building the whole model and training it. */
function predict(run: PlannedRun): { perRank: number; training: number } {
  const config = scaleModels[run.model];
  const parameters = gptParameterCount(config);
  const sizes = gptUnitSizes(config);
  const units = [
    { isRoot: true, paddedNumel: sizes.root },
    ...Array.from({ length: config.nLayers }, () => ({ isRoot: false, paddedNumel: sizes.block })),
  ];
  const whole = run.strategy === 'single' || run.strategy === 'no-shard';
  const training = whole
    ? 16 * parameters
    : estimateMemoryPerRank({ units, worldSize: run.worldSize, strategy: 'full-shard' }).totalBytes;
  // tfjs's wasm backend copies the parameters and gradients it computes with into its own heap
  // (which never shrinks): the whole model without sharding, the gathered units with it.
  const wasmCopies = whole ? 8 * parameters : 12 * (sizes.root + sizes.block);
  // Every rank builds the whole model before FSDP shards it (4 bytes per parameter).
  const construction = 4 * parameters + training / 4;
  // 25% for activations, garbage not yet collected and the allocator's slack (measured at 10 M).
  return { perRank: runtimeBytes + 1.25 * Math.max(construction, training + wasmCopies), training };
}

function diskWriteRate(): number {
  const file = join(scratch, 'disk-rate.bin');
  const chunk = Buffer.alloc(8 * MiB, 7);
  const total = 512 * MiB;
  const started = performance.now();
  const descriptor = openSync(file, 'w');
  for (let written = 0; written < total; written += chunk.length) writeSync(descriptor, chunk);
  fsyncSync(descriptor);
  closeSync(descriptor);
  const seconds = (performance.now() - started) / 1000;
  rmSync(file);
  return total / seconds;
}

interface RunOutcome {
  run: PlannedRun;
  predictedPerRankBytes: number;
  skipped?: string;
  failed?: string;
  launchToFirstStepMs?: number;
  ranks?: ScaleRankResult[];
  cgroupPeakBytes?: number[];
}

function execute(run: PlannedRun, index: number): RunOutcome {
  const prediction = predict(run);
  const outcome: RunOutcome = { run, predictedPerRankBytes: prediction.perRank };
  const machine = os.freemem() * 0.85;
  if (prediction.perRank * run.worldSize > machine) {
    outcome.skipped = `predicted ${(prediction.perRank / GiB).toFixed(2)} GiB per rank × ${run.worldSize} > 85% of the free ${(os.freemem() / GiB).toFixed(1)} GiB`;
    return outcome;
  }
  const force = process.env.BENCH_SCALE_FORCE === '1';
  if (
    run.capBytes !== undefined &&
    prediction.perRank > run.capBytes &&
    run.showsFailure !== true &&
    !force
  ) {
    outcome.skipped = `predicted ${(prediction.perRank / GiB).toFixed(2)} GiB per rank > the ${(run.capBytes / GiB).toFixed(0)} GiB cap`;
    return outcome;
  }
  const config = scaleModels[run.model];
  const output = join(scratch, `run-${index}`);
  const checkpointDirectory =
    withCheckpoints && run.strategy !== 'single' ? join(scratch, `checkpoint-${index}`) : undefined;
  const request: ScaleRunRequest = {
    model: run.model,
    config,
    strategy: run.strategy,
    worldSize: run.worldSize,
    ...(run.capBytes === undefined ? {} : { capBytes: run.capBytes }),
    batch: 1,
    seqLen: config.seqLen,
    warmupSteps: 1,
    measuredSteps,
    ...(checkpointDirectory === undefined ? {} : { checkpointDirectory }),
    output,
  };
  const launchArguments =
    run.strategy === 'single' && run.capBytes === undefined
      ? [...nodeArguments, rankScript, JSON.stringify(request)]
      : [
          ...nodeArguments,
          launcher,
          '--nproc-per-node',
          String(run.worldSize),
          ...(run.capBytes === undefined ? [] : ['--memory-per-rank', String(run.capBytes)]),
          rankScript,
          JSON.stringify(request),
        ];
  const launchedAt = Date.now();
  const child = spawnSync(process.execPath, launchArguments, {
    encoding: 'utf8',
    timeout: 3_600_000,
    maxBuffer: 64 * MiB,
    env: { ...process.env, OPENBLAS_NUM_THREADS: '1' },
  });
  const peaks = [...child.stderr.matchAll(/rank (\d+) peak memory ([\d.]+) (MiB|GiB)/g)]
    .sort((a, b) => Number(a[1]) - Number(b[1]))
    .map((match) => Number(match[2]) * (match[3] === 'GiB' ? GiB : MiB));
  if (peaks.length > 0) outcome.cgroupPeakBytes = peaks;
  if (checkpointDirectory !== undefined) rmSync(checkpointDirectory, { recursive: true, force: true });
  if (child.status !== 0) {
    const reason =
      child.stderr.match(/rank \d+ \(local rank \d+\) [^\n;]*/)?.[0] ??
      `exit ${child.status}: ${child.stderr.slice(-500)}`;
    outcome.failed = reason;
    return outcome;
  }
  outcome.ranks = Array.from(
    { length: run.worldSize },
    (_, rank) => JSON.parse(readFileSync(`${output}.rank${rank}.json`, 'utf8')) as ScaleRankResult,
  );
  outcome.launchToFirstStepMs = Math.max(...outcome.ranks.map((rank) => rank.firstStepAtMs)) - launchedAt;
  runtimeBytes = Math.max(...outcome.ranks.map((rank) => rank.runtimeRssBytes));
  return outcome;
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
const gib = (bytes: number | undefined) => (bytes === undefined ? '–' : (bytes / GiB).toFixed(2));

const diskBytesPerSecond = diskWriteRate();
process.stderr.write(
  `disk sequential write (512 MiB + fsync): ${(diskBytesPerSecond / 1e9).toFixed(2)} GB/s; load ${os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}\n`,
);
const outcomes: RunOutcome[] = [];
plan().forEach((run, index) => {
  const label = `${run.model} ${run.strategy} W=${run.worldSize}${run.capBytes === undefined ? '' : ` cap ${gib(run.capBytes)} GiB`}`;
  process.stderr.write(`${label} … `);
  const started = performance.now();
  const outcome = execute(run, index);
  outcomes.push(outcome);
  const how =
    outcome.skipped ??
    outcome.failed ??
    `step ${median(outcome.ranks![0]!.steps.slice(1).map((step) => step.stepMs)).toFixed(0)} ms`;
  process.stderr.write(`${how} (${((performance.now() - started) / 1000).toFixed(0)} s)\n`);
});

const lines = [
  `# Scale benchmark (${new Date().toISOString()})`,
  '',
  `Machine: ${os.cpus().length} cores, ${(os.totalmem() / GiB).toFixed(0)} GiB; load average at the end ${os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(
      ' ',
    )}. Disk sequential write ${(diskBytesPerSecond / 1e9).toFixed(2)} GB/s (same run). wasm backend, batch 1 × 64 per rank, AdamW, ${measuredSteps} measured steps after 1 warm-up. Memory in GiB per rank.`,
  '',
  '| model | parameters | run | cap | predicted peak | measured peak | FSDP estimate | runtime | wrap s | step ms (median) | compute | all-gather wait | reduce wait | optimizer | save s (GB/s, × disk) | load s | launch → first step s | outcome |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
];
for (const outcome of outcomes) {
  const { run } = outcome;
  const parameters = gptParameterCount(scaleModels[run.model]);
  const first = outcome.ranks?.[0];
  const measured = first?.steps.slice(1) ?? [];
  const stat = (pick: (step: ScaleRankResult['steps'][number]) => number) =>
    measured.length === 0 ? '–' : median(measured.map(pick)).toFixed(0);
  const peak =
    outcome.cgroupPeakBytes !== undefined
      ? Math.max(...outcome.cgroupPeakBytes)
      : outcome.ranks === undefined
        ? undefined
        : Math.max(...outcome.ranks.map((rank) => rank.peakRssBytes));
  const save = first?.checkpoint;
  const saveText =
    save === undefined
      ? '–'
      : `${(save.saveMs / 1000).toFixed(1)} (${((save.bytes * run.worldSize) / (save.saveMs / 1000) / 1e9).toFixed(2)}, ${((save.bytes * run.worldSize) / (save.saveMs / 1000) / diskBytesPerSecond).toFixed(2)}×)`;
  lines.push(
    `| ${run.model} | ${(parameters / 1e6).toFixed(0)} M | ${run.strategy} W=${run.worldSize} | ${run.capBytes === undefined ? '–' : gib(run.capBytes)} | ${gib(outcome.predictedPerRankBytes)} | ${gib(peak)} | ${gib(first?.estimateBytes)} | ${gib(first?.runtimeRssBytes)} | ${first === undefined ? '–' : (Math.max(...outcome.ranks!.map((rank) => rank.wrapMs)) / 1000).toFixed(1)} | ${stat((step) => step.stepMs)} | ${stat((step) => step.computeMs)} | ${stat((step) => step.allGatherWaitMs)} | ${stat((step) => step.reductionWaitMs)} | ${stat((step) => step.optimizerMs)} | ${saveText} | ${save === undefined ? '–' : (save.loadMs / 1000).toFixed(1)} | ${outcome.launchToFirstStepMs === undefined ? '–' : (outcome.launchToFirstStepMs / 1000).toFixed(1)} | ${outcome.skipped !== undefined ? `skipped: ${outcome.skipped}` : outcome.failed !== undefined ? `failed: ${outcome.failed}` : 'trained'} |`,
  );
}
const resultsDirectory = join(repositoryRoot, 'bench-results');
if (!existsSync(resultsDirectory)) mkdirSync(resultsDirectory, { recursive: true });
writeFileSync(join(resultsDirectory, 'scale.md'), `${lines.join('\n')}\n`);
writeFileSync(
  join(resultsDirectory, 'scale.json'),
  `${JSON.stringify({ date: new Date().toISOString(), diskBytesPerSecond, loadAverage: os.loadavg(), outcomes }, null, 2)}\n`,
);
writeFileSync(
  join(resultsDirectory, 'scale-memory.svg'),
  memoryPlot(
    outcomes.map((outcome) => ({
      parameters: gptParameterCount(scaleModels[outcome.run.model]),
      strategy: outcome.run.strategy,
      worldSize: outcome.run.worldSize,
      capped: outcome.run.capBytes !== undefined,
      measuredBytes:
        outcome.cgroupPeakBytes !== undefined
          ? Math.max(...outcome.cgroupPeakBytes)
          : outcome.ranks === undefined
            ? undefined
            : Math.max(...outcome.ranks.map((rank) => rank.peakRssBytes)),
      predictedBytes: outcome.predictedPerRankBytes,
    })),
  ),
);
process.stdout.write(`${lines.join('\n')}\n`);
rmSync(scratch, { recursive: true, force: true });
