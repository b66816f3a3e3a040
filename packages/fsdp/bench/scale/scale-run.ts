/**
 * Runs one planned row of `npm run bench:scale`: skipped with the reason when it cannot fit,
 * else launched (through fsdp-run unless it is an uncapped single process) and its ranks'
 * figures collected, with the launcher's per-rank cgroup peaks and the failure, if any, told by
 * the last phase each rank reported.
 */
import { spawnSync } from 'node:child_process';
import {
  appendFileSync,
  closeSync,
  existsSync,
  fsyncSync,
  openSync,
  readFileSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ScaleRankResult, ScaleRunRequest } from './scale-config';
import { scaleModels } from './scale-config';
import { GiB, MiB, type PlannedRun, predict, reasonToSkip, runKey, runtime, settings } from './scale-plan';

const launcher = join(
  dirname(createRequire(import.meta.url).resolve('@fsdp-ts/collectives/package.json')),
  'src/bin/fsdp-run.ts',
);
const rankScript = fileURLToPath(new URL('./scale-rank.ts', import.meta.url));
const nodeArguments = ['--conditions=@fsdp-ts/source', '--import', 'tsx'];

export interface RunOutcome {
  run: PlannedRun;
  predictedPerRankBytes: number;
  skipped?: string;
  failed?: string;
  launchToFirstStepMs?: number;
  ranks?: ScaleRankResult[];
  cgroupPeakBytes?: number[];
}

/** One writer, `total` bytes in 8 MiB writes, one fsync at the end: the disk figure printed at the start. */
export function diskWriteRate(scratch: string, total = 512 * MiB): number {
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

export function execute(run: PlannedRun, index: number, scratch: string): RunOutcome {
  const prediction = predict(run);
  const outcome: RunOutcome = { run, predictedPerRankBytes: prediction.perRank };
  const skip = reasonToSkip(run, prediction.perRank, scratch);
  if (skip !== undefined) {
    outcome.skipped = skip;
    return outcome;
  }
  const config = scaleModels[run.model];
  const output = join(scratch, `run-${index}`);
  const checkpointDirectory =
    settings.withCheckpoints && run.strategy !== 'single' && run.checkpoint !== false
      ? join(scratch, `checkpoint-${index}`)
      : undefined;
  // An offload row's ranks write under their own directory, removed after the run.
  const offloadDirectory = run.offloadRow === true ? join(scratch, `offload-${index}`) : undefined;
  const request: ScaleRunRequest = {
    model: run.model,
    config,
    strategy: run.strategy,
    worldSize: run.worldSize,
    ...(run.capBytes === undefined ? {} : { capBytes: run.capBytes }),
    batch: 1,
    seqLen: config.seqLen,
    warmupSteps: 1,
    measuredSteps: run.measuredSteps ?? settings.measuredSteps,
    deferred: settings.deferred,
    activationCheckpointing: run.activationCheckpointing ?? settings.recomputeEverywhere,
    ...(run.backwardPrefetch === undefined ? {} : { backwardPrefetch: run.backwardPrefetch }),
    ...(run.forwardPrefetch === undefined ? {} : { forwardPrefetch: run.forwardPrefetch }),
    ...(checkpointDirectory === undefined ? {} : { checkpointDirectory }),
    ...(run.offload === undefined || offloadDirectory === undefined
      ? {}
      : { offload: { ...run.offload, directory: offloadDirectory } }),
    ...(offloadDirectory === undefined
      ? {}
      : { diskProbe: { bytes: settings.diskProbeBytes, directory: offloadDirectory } }),
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
  if (process.env.BENCH_SCALE_LOG !== undefined)
    appendFileSync(process.env.BENCH_SCALE_LOG, `## ${runKey(run)}\n${child.stderr}\n`);
  const peaks = [...child.stderr.matchAll(/rank (\d+) peak memory ([\d.]+) (MiB|GiB)/g)]
    .sort((a, b) => Number(a[1]) - Number(b[1]))
    .map((match) => Number(match[2]) * (match[3] === 'GiB' ? GiB : MiB));
  if (peaks.length > 0) outcome.cgroupPeakBytes = peaks;
  if (checkpointDirectory !== undefined) rmSync(checkpointDirectory, { recursive: true, force: true });
  if (offloadDirectory !== undefined) rmSync(offloadDirectory, { recursive: true, force: true });
  // Each rank writes its figures after training and again after the checkpoint: a run stopped
  // while saving keeps its training figures.
  const files = Array.from({ length: run.worldSize }, (_, rank) => `${output}.rank${rank}.json`);
  if (files.every((file) => existsSync(file)))
    outcome.ranks = files.map((file) => JSON.parse(readFileSync(file, 'utf8')) as ScaleRankResult);
  if (child.status !== 0) {
    // The launcher's line on how the rank ended, and the error it reported, when it did.
    const ended = child.stderr.match(/rank \d+ \(local rank \d+\) [^\n;]*/)?.[0];
    const error = child.stderr.match(/fsdp-run: failure on ranks? [^:\n]*: ([^\n]*)/)?.[1];
    const reason =
      ended === undefined
        ? `exit ${child.status}: ${child.stderr.slice(-500)}`
        : error === undefined || ended.includes(error.slice(0, 40))
          ? ended
          : `${ended}: ${error.slice(0, 300)}`;
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
  runtime.bytes = Math.max(...outcome.ranks.map((rank) => rank.runtimeRssBytes));
  return outcome;
}
