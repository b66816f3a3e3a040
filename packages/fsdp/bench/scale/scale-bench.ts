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
 * BENCH_SCALE_STEPS=n measured steps (default 3), BENCH_SCALE_CHECKPOINT=0 to skip checkpoints,
 * BENCH_SCALE_RESERVE=6 GiB left available to the rest of the machine (a run that could take more
 * is skipped), BENCH_SCALE_LOG=file to append every run's stderr (phases, launcher), BENCH_SCALE_DEFERRED=0 to build every model whole before wrapping (default: FSDP runs build it
 * inside nn's deferredInit, so each rank makes only its shards).
 * Writes bench-results/scale.json, scale.md and scale-memory.svg at the repository root.
 */
import { spawnSync } from 'node:child_process';
import {
  appendFileSync,
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
const deferred = process.env.BENCH_SCALE_DEFERRED !== '0';
const recomputeEverywhere = process.env.BENCH_SCALE_RECOMPUTE === '1';
/** Memory left available for the rest of the machine while a run goes (BENCH_SCALE_RESERVE, GiB). */
const MACHINE_RESERVE_BYTES = Number(process.env.BENCH_SCALE_RESERVE ?? 6) * GiB;
/** RSS of a rank before any model (Node, tfjs, the wasm module); replaced by the first run's measurement. */
let runtimeBytes = 300 * MiB;

interface PlannedRun {
  model: ScaleModelName;
  strategy: ScaleStrategy;
  worldSize: number;
  capBytes?: number;
  /** The row exists to show that this cap cannot hold the model: run it even though predicted to fail. */
  showsFailure?: boolean;
  /** Save and load a checkpoint after training (default: every FSDP run unless BENCH_SCALE_CHECKPOINT=0). */
  checkpoint?: boolean;
  /** FSDP's activationCheckpointing for this row (default BENCH_SCALE_RECOMPUTE=1, else off). */
  activationCheckpointing?: boolean;
  /** Tells this row apart from another of the same model, strategy, world size and capping. */
  tag?: string;
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
    // The headline trains without a checkpoint: saving copies the optimizer state (its state dict)
    // and loading stages a full copy of the shard and the state before applying them (about
    // 3·8·P/N bytes more per rank), which a 2 GiB cap does not hold at 350 M. The checkpoint is
    // measured in its own row with room for those copies.
    runs.push({ model: '350M', strategy: 'full-shard', worldSize: 4, capBytes: 2 * GiB, checkpoint: false });
    runs.push({
      model: '350M',
      strategy: 'full-shard',
      worldSize: 4,
      capBytes: 3.5 * GiB,
      checkpoint: true,
      tag: 'checkpoint',
    });
  }
  if (models.includes('1.3B'))
    runs.push({ model: '1.3B', strategy: 'full-shard', worldSize: 4, capBytes: 6 * GiB });
  const cap = process.env.BENCH_SCALE_CAP;
  if (cap !== undefined)
    for (const run of runs)
      run.capBytes ??= Number.parseFloat(cap) * (/g/i.test(cap) ? GiB : /m/i.test(cap) ? MiB : 1);
  // A capped generic row and a dedicated row of the same key: keep the dedicated one (listed later).
  const unique = [...new Map(runs.map((run) => [runKey(run), run])).values()];
  const only = process.env.BENCH_SCALE_ONLY?.split(',');
  return only === undefined ? unique : unique.filter((run) => only.includes(runKey(run)));
}

/** '350M/full-shard/4', '350M/full-shard/4/cap' or '350M/full-shard/4/cap/checkpoint'. */
function runKey(run: PlannedRun): string {
  return `${run.model}/${run.strategy}/${run.worldSize}${run.capBytes === undefined ? '' : '/cap'}${run.tag === undefined ? '' : `/${run.tag}`}`;
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
  // Built whole (a single process, or BENCH_SCALE_DEFERRED=0): 4 bytes per parameter before
  // FSDP shards it. Deferred: each rank makes only its shards while wrapping.
  const builtWhole = run.strategy === 'single' || !deferred;
  const construction = builtWhole ? 4 * parameters + training / 4 : training / 4;
  // 25% for activations, garbage not yet collected and the allocator's slack (measured at 10 M).
  return { perRank: runtimeBytes + 1.25 * Math.max(construction, training + wasmCopies), training };
}

function diskWriteRate(total = 512 * MiB): number {
  const file = join(scratch, 'disk-rate.bin');
  const chunk = Buffer.alloc(8 * MiB, 7);
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
  /**
   * The disk's sequential write rate measured right before and right after this run (runs with
   * a checkpoint): the save is compared with their mean, the disk being shared and its rate
   * drifting with the load.
   */
  diskBytesPerSecondAround?: [number, number];
}

function execute(run: PlannedRun, index: number): RunOutcome {
  const prediction = predict(run);
  const outcome: RunOutcome = { run, predictedPerRankBytes: prediction.perRank };
  // What the run may take: its cap where it has one (the kernel enforces it), else the prediction.
  // Leave MACHINE_RESERVE_BYTES available for everything else on the host.
  const bound = Math.min(prediction.perRank, run.capBytes ?? Number.POSITIVE_INFINITY) * run.worldSize;
  const spare = os.freemem() - MACHINE_RESERVE_BYTES;
  if (bound > spare) {
    outcome.skipped = `needs up to ${(bound / GiB).toFixed(1)} GiB (${run.worldSize} × ${(bound / run.worldSize / GiB).toFixed(2)}), but only ${(os.freemem() / GiB).toFixed(1)} GiB is available and ${(MACHINE_RESERVE_BYTES / GiB).toFixed(0)} GiB stays free for the rest of the machine`;
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
    withCheckpoints && run.strategy !== 'single' && run.checkpoint !== false
      ? join(scratch, `checkpoint-${index}`)
      : undefined;
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
    deferred,
    activationCheckpointing: run.activationCheckpointing ?? recomputeEverywhere,
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
  const diskBefore = checkpointDirectory === undefined ? undefined : diskWriteRate(256 * MiB);
  const launchedAt = Date.now();
  const child = spawnSync(process.execPath, launchArguments, {
    encoding: 'utf8',
    timeout: 3_600_000,
    maxBuffer: 64 * MiB,
    env: { ...process.env, OPENBLAS_NUM_THREADS: '1' },
  });
  if (process.env.BENCH_SCALE_LOG !== undefined)
    appendFileSync(process.env.BENCH_SCALE_LOG, `## ${runKey(run)}\n${child.stderr}\n`);
  const peaks = [...child.stderr.matchAll(/rank (\d+) peak memory ([\d.]+) (MiB|GiB)/g)]
    .sort((a, b) => Number(a[1]) - Number(b[1]))
    .map((match) => Number(match[2]) * (match[3] === 'GiB' ? GiB : MiB));
  if (peaks.length > 0) outcome.cgroupPeakBytes = peaks;
  if (checkpointDirectory !== undefined) rmSync(checkpointDirectory, { recursive: true, force: true });
  if (diskBefore !== undefined) outcome.diskBytesPerSecondAround = [diskBefore, diskWriteRate(256 * MiB)];
  // Each rank writes its figures after training and again after the checkpoint: a run stopped
  // while saving keeps its training figures.
  const files = Array.from({ length: run.worldSize }, (_, rank) => `${output}.rank${rank}.json`);
  if (files.every((file) => existsSync(file)))
    outcome.ranks = files.map((file) => JSON.parse(readFileSync(file, 'utf8')) as ScaleRankResult);
  if (child.status !== 0) {
    const reason =
      child.stderr.match(/rank \d+ \(local rank \d+\) [^\n;]*/)?.[0] ??
      `exit ${child.status}: ${child.stderr.slice(-500)}`;
    // The last phase each rank reported (scale-rank.ts prints one line per phase).
    const last = new Map<string, string>();
    for (const match of child.stderr.matchAll(
      /\[scale\] rank (\d+) ([^:\n]+): RSS ([\d.]+) GiB \(peak ([\d.]+)/g,
    ))
      last.set(match[1]!, `${match[2]} ${match[3]} (peak ${match[4]})`);
    const progress = [...last].map(([rank, phase]) => `rank ${rank} last reported ${phase} GiB`).join(', ');
    outcome.failed = `${outcome.ranks === undefined ? reason : `after training, while checkpointing: ${reason}`}${progress === '' ? '' : ` (${progress})`}`;
    if (outcome.ranks === undefined) return outcome;
  }
  if (outcome.ranks === undefined) {
    outcome.failed = `exit 0 but no figures from every rank: ${child.stderr.slice(-500)}`;
    return outcome;
  }
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
  const label = `${run.model} ${run.strategy} W=${run.worldSize}${run.capBytes === undefined ? '' : ` cap ${gib(run.capBytes)} GiB`}${run.tag === undefined ? '' : ` (${run.tag})`}`;
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

/** Peak memory per rank: the launcher's cgroup peak when capped, else the ranks' peak RSS. */
function peakPerRank(outcome: RunOutcome): number | undefined {
  if (outcome.cgroupPeakBytes !== undefined) return Math.max(...outcome.cgroupPeakBytes);
  return outcome.ranks === undefined
    ? undefined
    : Math.max(...outcome.ranks.map((rank) => rank.peakRssBytes));
}

/** Parameters + gradients + optimizer state on the rank holding most (live bytes after step 1). */
function trainingStatePerRank(outcome: RunOutcome): number | undefined {
  if (outcome.ranks === undefined) return undefined;
  return Math.max(
    ...outcome.ranks.map(
      ({ trainingStateBytes: bytes }) => bytes.parameters + bytes.gradients + bytes.optimizer,
    ),
  );
}

/** The disk rate a run's save is compared with: measured around the run, else at the start. */
function diskRateFor(outcome: RunOutcome): number {
  const around = outcome.diskBytesPerSecondAround;
  return around === undefined ? diskBytesPerSecond : (around[0] + around[1]) / 2;
}

/** The checkpoint's bytes (every rank's file) per second of the slowest rank's save. */
function saveRate(outcome: RunOutcome): number | undefined {
  const saves = outcome.ranks?.map((rank) => rank.checkpoint);
  if (saves === undefined || saves.some((save) => save === undefined)) return undefined;
  return saves[0]!.bytes / (Math.max(...saves.map((save) => save!.saveMs)) / 1000);
}

const measuredStepMs = (outcome: RunOutcome | undefined) =>
  outcome?.ranks === undefined
    ? undefined
    : Math.max(...outcome.ranks.map((rank) => median(rank.steps.slice(1).map((step) => step.stepMs))));

const loadText = os
  .loadavg()
  .map((x) => x.toFixed(1))
  .join(' ');
const lines = [
  `# Scale benchmark (${new Date().toISOString()})`,
  '',
  `Machine: ${os.cpus().length} cores, ${(os.totalmem() / GiB).toFixed(0)} GiB; load average at the end ${loadText}. Disk sequential write ${(diskBytesPerSecond / 1e9).toFixed(2)} GB/s (512 MiB + fsync, same run). wasm backend, batch 1 × 64 per rank, AdamW, ${measuredSteps} measured steps after 1 warm-up; FSDP runs build the model ${deferred ? 'inside deferredInit (each rank makes only its shards)' : 'whole before wrapping'}. Memory in GiB per rank; "P+G+opt" is the live bytes of parameters, gradients and AdamW state on the rank holding most.`,
  '',
  '| model | parameters | run | cap | predicted peak | measured peak | P+G+opt | FSDP estimate | runtime | wrap s | step ms (median) | compute | all-gather wait | reduce wait | optimizer | save s (GB/s, × disk GB/s around the run) | load s | launch → first step s | outcome |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
];
for (const outcome of outcomes) {
  const { run } = outcome;
  const parameters = gptParameterCount(scaleModels[run.model]);
  const first = outcome.ranks?.[0];
  const measured = first?.steps.slice(1) ?? [];
  const stat = (pick: (step: ScaleRankResult['steps'][number]) => number) =>
    measured.length === 0 ? '–' : median(measured.map(pick)).toFixed(0);
  const save = first?.checkpoint;
  const rate = saveRate(outcome);
  const saveText =
    save === undefined || rate === undefined
      ? '–'
      : `${(save.saveMs / 1000).toFixed(1)} (${(rate / 1e9).toFixed(2)}, ${(rate / diskRateFor(outcome)).toFixed(2)}× of ${(diskRateFor(outcome) / 1e9).toFixed(2)})`;
  const wrap =
    outcome.ranks === undefined
      ? '–'
      : (Math.max(...outcome.ranks.map((rank) => rank.wrapMs)) / 1000).toFixed(1);
  const result =
    outcome.skipped !== undefined
      ? `skipped: ${outcome.skipped}`
      : outcome.failed !== undefined
        ? `failed: ${outcome.failed}`
        : 'trained';
  lines.push(
    `| ${run.model} | ${(parameters / 1e6).toFixed(0)} M | ${run.strategy} W=${run.worldSize} | ${run.capBytes === undefined ? '–' : gib(run.capBytes)} | ${gib(outcome.predictedPerRankBytes)} | ${gib(peakPerRank(outcome))} | ${gib(trainingStatePerRank(outcome))} | ${gib(first?.estimateBytes)} | ${gib(first?.runtimeRssBytes)} | ${wrap} | ${stat((step) => step.stepMs)} | ${stat((step) => step.computeMs)} | ${stat((step) => step.allGatherWaitMs)} | ${stat((step) => step.reductionWaitMs)} | ${stat((step) => step.optimizerMs)} | ${saveText} | ${save === undefined || !Number.isFinite(save.loadMs) ? '–' : (save.loadMs / 1000).toFixed(1)} | ${outcome.launchToFirstStepMs === undefined ? '–' : (outcome.launchToFirstStepMs / 1000).toFixed(1)} | ${result} |`,
  );
}
lines.push('', 'RSS per phase, GiB (the largest over the ranks):', '');
for (const outcome of outcomes) {
  if (outcome.ranks === undefined) continue;
  const phases = new Map<string, number>();
  for (const rank of outcome.ranks)
    for (const [phase, bytes] of Object.entries(rank.phaseRssBytes))
      phases.set(phase, Math.max(phases.get(phase) ?? 0, bytes));
  lines.push(
    `- ${runKey(outcome.run)}: ${[...phases].map(([phase, bytes]) => `${phase} ${gib(bytes)}`).join(', ')}`,
  );
}
lines.push('', ...targetLines(outcomes));

/** The issue's targets, each met / not met / not measured, from this run's rows. */
function targetLines(all: RunOutcome[]): string[] {
  const find = (model: ScaleModelName, strategy: ScaleStrategy, worldSize: number, capped?: boolean) =>
    all.find(
      (outcome) =>
        outcome.run.model === model &&
        outcome.run.strategy === strategy &&
        outcome.run.worldSize === worldSize &&
        (capped === undefined || (outcome.run.capBytes !== undefined) === capped),
    );
  const verdict = (met: boolean | undefined) =>
    met === undefined ? 'not measured' : met ? 'met' : 'not met';
  const out = ['## Targets', ''];
  const trained = (outcome: RunOutcome | undefined) =>
    outcome?.ranks?.every((rank) => rank.steps.length === 1 + measuredSteps) === true;
  // 1. 350 M full-shard W=4 under a 2 GiB cap per rank, where a single capped rank cannot.
  const headline = all.find(
    (outcome) =>
      outcome.run.model === '350M' &&
      outcome.run.strategy === 'full-shard' &&
      outcome.run.worldSize === 4 &&
      outcome.run.capBytes !== undefined &&
      outcome.run.capBytes <= 2 * GiB &&
      outcome.run.tag === undefined,
  );
  const single = all.find(
    (outcome) =>
      outcome.run.model === '350M' && outcome.run.strategy === 'single' && outcome.run.capBytes !== undefined,
  );
  const singleCannot =
    single === undefined
      ? undefined
      : single.failed !== undefined || single.predictedPerRankBytes > (single.run.capBytes ?? 0);
  out.push(
    `- 350 M full-shard W=4 trains ${measuredSteps} steps under a 2 GiB cap per rank: ${verdict(headline === undefined ? undefined : trained(headline))}` +
      (headline === undefined
        ? ''
        : ` (peak ${gib(peakPerRank(headline))} GiB per rank${headline.failed === undefined ? '' : `; ${headline.failed}`})`) +
      `; a single rank under the same cap cannot: ${verdict(singleCannot)}` +
      (single === undefined
        ? ''
        : ` (${single.failed ?? single.skipped ?? 'it trained'}; predicted ${gib(single.predictedPerRankBytes)} GiB)`),
  );
  // 2. P+G+opt per rank falls as 1/W within 10% from W=1 to W=4.
  for (const model of ['100M', '350M'] as const) {
    const four = trainingStatePerRank(find(model, 'full-shard', 4) ?? ({} as RunOutcome));
    if (four === undefined) continue;
    const oneRun = find(model, 'full-shard', 1);
    const measuredOne = oneRun === undefined ? undefined : trainingStatePerRank(oneRun);
    const one = measuredOne ?? 16 * gptParameterCount(scaleModels[model]);
    const ratio = one / four / 4;
    out.push(
      `- ${model}: parameters + gradients + AdamW state per rank W=1 → W=4 is ${(one / GiB).toFixed(2)} → ${(four / GiB).toFixed(2)} GiB, ${ratio.toFixed(3)} of 1/W (within 10%: ${verdict(Math.abs(ratio - 1) <= 0.1)}; W=1 ${measuredOne === undefined ? 'from the model 16·P, not run' : 'measured'})`,
    );
  }
  // 3. Step time at W=4 grows linearly with parameters from 100 M to 350 M (within 20%).
  const step100 = measuredStepMs(find('100M', 'full-shard', 4));
  const step350 = measuredStepMs(headline ?? find('350M', 'full-shard', 4));
  if (step100 !== undefined && step350 !== undefined) {
    const ratio =
      step350 / step100 / (gptParameterCount(scaleModels['350M']) / gptParameterCount(scaleModels['100M']));
    out.push(
      `- step time 100 M → 350 M at W=4: ${(step100 / 1000).toFixed(1)} → ${(step350 / 1000).toFixed(1)} s, ${ratio.toFixed(2)} of linear in parameters (within 20%: ${verdict(Math.abs(ratio - 1) <= 0.2)}; wall clock on a loaded machine)`,
    );
  } else out.push('- step time 100 M → 350 M at W=4: not measured');
  // 4. saveCheckpoint at 350 M >= 50% of the disk's sequential write rate, same run.
  const saved = all.find(
    (outcome) =>
      outcome.run.model === '350M' &&
      outcome.run.strategy === 'full-shard' &&
      saveRate(outcome) !== undefined,
  );
  const rate = saved === undefined ? undefined : saveRate(saved);
  const disk = saved === undefined ? diskBytesPerSecond : diskRateFor(saved);
  out.push(
    rate === undefined
      ? '- saveCheckpoint at 350 M ≥ 50% of the disk rate: not measured'
      : `- saveCheckpoint at 350 M (${saved!.run.strategy} W=${saved!.run.worldSize}, cap ${gib(saved!.run.capBytes)} GiB): ${(rate / 1e9).toFixed(2)} GB/s against the disk's ${(disk / 1e9).toFixed(2)} GB/s (256 MiB + fsync right before and after the run), ${(rate / disk).toFixed(2)}× (≥ 0.5: ${verdict(rate / disk >= 0.5)})`,
  );
  out.push('', `Load average: ${loadText}.`);
  return out;
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
      // A run stopped by its cap shows the cap, not what it needed: no dot.
      measuredBytes: outcome.failed === undefined ? peakPerRank(outcome) : undefined,
      predictedBytes: outcome.predictedPerRankBytes,
    })),
    2 * GiB,
  ),
);
process.stdout.write(`${lines.join('\n')}\n`);
rmSync(scratch, { recursive: true, force: true });
