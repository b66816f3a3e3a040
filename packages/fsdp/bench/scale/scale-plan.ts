/**
 * What `npm run bench:scale` runs (see scale-bench.ts for the environment variables): the rows,
 * their keys, and the memory each is predicted to take per rank before it starts.
 */
import { existsSync, readFileSync, statfsSync } from 'node:fs';
import os from 'node:os';
import { estimateMemoryPerRank, memoryWarning, type UnitSize } from '@fsdp-ts/fsdp';
import {
  gptParameterCount,
  gptUnitSizes,
  type ScaleModelName,
  type ScaleOffload,
  type ScaleStrategy,
  scaleModels,
} from './scale-config';

export const GiB = 1024 ** 3;
export const MiB = 1024 ** 2;

/** The run's settings, from the environment (scale-bench.ts lists them). */
export const settings = {
  models: (process.env.BENCH_SCALE_MODELS ?? '10M,100M,350M').split(',') as ScaleModelName[],
  measuredSteps: Number(process.env.BENCH_SCALE_STEPS ?? 3),
  withCheckpoints: process.env.BENCH_SCALE_CHECKPOINT !== '0',
  deferred: process.env.BENCH_SCALE_DEFERRED !== '0',
  recomputeEverywhere: process.env.BENCH_SCALE_RECOMPUTE === '1',
  force: process.env.BENCH_SCALE_FORCE === '1',
  /** Memory left available for the rest of the machine while a run goes (BENCH_SCALE_RESERVE, GiB). */
  machineReserveBytes: Number(process.env.BENCH_SCALE_RESERVE ?? 6) * GiB,
  /** The same for a row under --memory-per-rank, whose caps the kernel enforces (BENCH_SCALE_RESERVE too, default 2). */
  cappedReserveBytes: Number(process.env.BENCH_SCALE_RESERVE ?? 2) * GiB,
  /** The offload rows: '1' with the others (default), 'only' without them, '0' not at all. */
  offloadRows: (process.env.BENCH_SCALE_OFFLOAD ?? '1') as '1' | 'only' | '0',
  /** The offload headline's model and cap, and the model whose step time is compared with and without offload. */
  offloadModel: (process.env.BENCH_SCALE_OFFLOAD_MODEL ?? '1.3B') as ScaleModelName,
  offloadCapBytes: sizeBytes(process.env.BENCH_SCALE_OFFLOAD_CAP ?? '4G'),
  offloadPeerModel: (process.env.BENCH_SCALE_OFFLOAD_PEER_MODEL ?? '350M') as ScaleModelName,
  offloadPeerCapBytes: sizeBytes(process.env.BENCH_SCALE_OFFLOAD_PEER_CAP ?? '3G'),
  /** Measured steps of the offload rows after their warm-up (default 2: 3 steps trained in all). */
  offloadMeasuredSteps: Number(process.env.BENCH_SCALE_OFFLOAD_STEPS ?? 2),
  /** Ranks of every offload row (default 4; 2 to validate the harness on a small model). */
  offloadWorldSize: Number(process.env.BENCH_SCALE_OFFLOAD_WORLD_SIZE ?? 4),
  /** BENCH_SCALE_OFFLOAD_STRETCH=1: the issue's stretch rows (parameters offloaded too). */
  offloadStretch: process.env.BENCH_SCALE_OFFLOAD_STRETCH === '1',
  /** Bytes each rank writes and reads back to measure the disk around an offload row. */
  diskProbeBytes: 256 * 1024 ** 2,
};

/** '2G', '512M', '1073741824' → bytes (powers of 1024, as fsdp-run's --memory-per-rank). */
export function sizeBytes(text: string): number {
  const scale = /g/i.test(text) ? GiB : /m/i.test(text) ? MiB : 1;
  return Number.parseFloat(text) * scale;
}

/** RSS of a rank before any model (Node, tfjs, the wasm module); replaced by the first run's measurement. */
export const runtime = { bytes: 300 * MiB };

export interface PlannedRun {
  model: ScaleModelName;
  strategy: ScaleStrategy;
  worldSize: number;
  capBytes?: number;
  /** The row exists to show that this cap cannot hold the model: run it even though predicted to fail. */
  showsFailure?: boolean;
  /** A target row (the headline): run under its cap even when the prediction exceeds it. */
  isTarget?: boolean;
  /** Save and load a checkpoint after training (default: every FSDP run unless BENCH_SCALE_CHECKPOINT=0). */
  checkpoint?: boolean;
  /** FSDP's activationCheckpointing for this row (default BENCH_SCALE_RECOMPUTE=1, else off). */
  activationCheckpointing?: boolean;
  /** FSDP's backwardPrefetch for this row (default true). */
  backwardPrefetch?: boolean;
  /** FSDP's forwardPrefetch for this row (default true). */
  forwardPrefetch?: boolean;
  /** Tells this row apart from another of the same model, strategy, world size and capping. */
  tag?: string;
  /** FSDP's offload option for this row (an offload row: its directory is made per run). */
  offload?: ScaleOffload;
  /** One of the offload rows (written to scale-offload.json). */
  offloadRow?: boolean;
  /** Measured steps after the warm-up, where not BENCH_SCALE_STEPS. */
  measuredSteps?: number;
  /**
   * Not started when FSDP's own estimate exceeds the cap (the row shows the refusal, with FSDP's
   * memory warning as the reason); BENCH_SCALE_FORCE=1 runs it, to be killed at the cap instead.
   */
  refusedByEstimate?: boolean;
}

/**
 * The offload rows (issue 33): the step-time cost of optimizer state on disk at a model that fits
 * without it (the peer model, with and without offload, one after the other under the same cap),
 * then the headline: a model whose 16·P exceeds the ranks' caps together, trained with its
 * optimizer state on disk, beside the same run without offload (refused by FSDP's estimate, or
 * with BENCH_SCALE_FORCE=1 run until the cap kills it).
 */
export function offloadPlan(): PlannedRun[] {
  const disk: ScaleOffload = { optimizerState: 'disk' };
  const both: ScaleOffload = { optimizerState: 'disk', parameters: 'disk' };
  const row = (run: PlannedRun): PlannedRun => ({
    ...run,
    checkpoint: false,
    offloadRow: true,
    measuredSteps: settings.offloadMeasuredSteps,
  });
  const worldSize = settings.offloadWorldSize;
  const peer = { model: settings.offloadPeerModel, strategy: 'full-shard', worldSize } as const;
  const headline = { model: settings.offloadModel, strategy: 'full-shard', worldSize } as const;
  const runs = [
    row({ ...peer, capBytes: settings.offloadPeerCapBytes, tag: 'offload-peer' }),
    row({ ...peer, capBytes: settings.offloadPeerCapBytes, tag: 'offload-state-disk', offload: disk }),
    row({
      ...headline,
      capBytes: settings.offloadCapBytes,
      tag: 'offload-state-disk',
      offload: disk,
      isTarget: true,
      // What fits 4 GiB (architecture/performance.md, "Offload: the 1.3 B GPT under 4 GiB per
      // rank"): activation checkpointing, and one gathered unit at a time in backward.
      activationCheckpointing: true,
      backwardPrefetch: process.env.BENCH_SCALE_OFFLOAD_BACKWARD_PREFETCH === '1',
      ...(process.env.BENCH_SCALE_OFFLOAD_FORWARD_PREFETCH === '0' ? { forwardPrefetch: false } : {}),
    }),
    row({
      ...headline,
      capBytes: settings.offloadCapBytes,
      tag: 'no-offload',
      refusedByEstimate: true,
      showsFailure: true,
    }),
  ];
  if (settings.offloadStretch)
    runs.push(
      row({ ...headline, capBytes: 3 * GiB, tag: 'offload-both-disk', offload: both, isTarget: true }),
      row({
        model: '2.7B',
        strategy: 'full-shard',
        worldSize: 4,
        capBytes: 4 * GiB,
        tag: 'offload-both-disk',
        offload: both,
        isTarget: true,
      }),
    );
  return runs;
}

export function plan(): PlannedRun[] {
  const runs: PlannedRun[] = [];
  if (settings.offloadRows === 'only') return selected(offloadPlan());
  // 1.3 B is planned only as the stretch row below, unless named.
  for (const model of settings.models) {
    runs.push({ model, strategy: 'single', worldSize: 1 });
    for (const worldSize of [2, 4]) runs.push({ model, strategy: 'no-shard', worldSize });
    for (const worldSize of [1, 2, 4]) runs.push({ model, strategy: 'full-shard', worldSize });
  }
  if (settings.models.includes('350M')) {
    runs.push({ model: '350M', strategy: 'single', worldSize: 1, capBytes: 2 * GiB, showsFailure: true });
    // The headline: trains, saves and loads its checkpoint under the same 2 GiB cap (checkpoints
    // stream: [Note: checkpoints stream the optimizer state]). Run even where the (pessimistic)
    // prediction exceeds the cap: the cap is what it shows, and the kernel enforces it.
    runs.push({ model: '350M', strategy: 'full-shard', worldSize: 4, capBytes: 2 * GiB, isTarget: true });
  }
  // The stretch row, always planned: predicted, and skipped with the reason where the machine's
  // free memory cannot give four ranks 6 GiB each and keep the reserve.
  runs.push({ model: '1.3B', strategy: 'full-shard', worldSize: 4, capBytes: 6 * GiB, isTarget: true });
  const cap = process.env.BENCH_SCALE_CAP;
  if (cap !== undefined) for (const run of runs) run.capBytes ??= sizeBytes(cap);
  if (settings.offloadRows === '1') runs.push(...offloadPlan());
  return selected(runs);
}

/** Without repeated keys (a capped generic row and a dedicated one: the later), and only BENCH_SCALE_ONLY's. */
function selected(runs: PlannedRun[]): PlannedRun[] {
  const unique = [...new Map(runs.map((run) => [runKey(run), run])).values()];
  const only = process.env.BENCH_SCALE_ONLY?.split(',');
  return only === undefined ? unique : unique.filter((run) => only.includes(runKey(run)));
}

/** '350M/full-shard/4', '350M/full-shard/4/cap' or '350M/full-shard/4/cap/checkpoint'. */
export function runKey(run: PlannedRun): string {
  return `${run.model}/${run.strategy}/${run.worldSize}${run.capBytes === undefined ? '' : '/cap'}${run.tag === undefined ? '' : `/${run.tag}`}`;
}

/** The units FSDP makes of a scale GPT with one TransformerBlock per unit (unpadded). */
function gptUnits(model: ScaleModelName): UnitSize[] {
  const config = scaleModels[model];
  const sizes = gptUnitSizes(config);
  return [
    { isRoot: true, paddedNumel: sizes.root },
    ...Array.from({ length: config.nLayers }, () => ({ isRoot: false, paddedNumel: sizes.block })),
  ];
}

/** FSDP's estimate for a full-shard row, with its offload ([Note: memory with offload]). */
export function fsdpEstimate(run: PlannedRun) {
  return estimateMemoryPerRank({
    units: gptUnits(run.model),
    worldSize: run.worldSize,
    strategy: 'full-shard',
    offload: run.offload ?? {},
  });
}

/** Predicted peak bytes per rank: the runtime, plus the larger of building the whole model and training it. */
export function predict(run: PlannedRun): { perRank: number; training: number } {
  const config = scaleModels[run.model];
  const parameters = gptParameterCount(config);
  const sizes = gptUnitSizes(config);
  const whole = run.strategy === 'single' || run.strategy === 'no-shard';
  const training = whole ? 16 * parameters : fsdpEstimate(run).totalBytes;
  // tfjs's wasm backend copies the parameters and gradients it computes with into its own heap
  // (which never shrinks): the whole model without sharding, the gathered units with it.
  const wasmCopies = whole ? 8 * parameters : 12 * (sizes.root + sizes.block);
  // Built whole (a single process, or BENCH_SCALE_DEFERRED=0): 4 bytes per parameter before
  // FSDP shards it. Deferred: each rank makes only its shards while wrapping.
  const builtWhole = run.strategy === 'single' || !settings.deferred;
  const construction = builtWhole ? 4 * parameters + training / 4 : training / 4;
  // 25% for activations, garbage not yet collected and the allocator's slack (measured at 10 M).
  return { perRank: runtime.bytes + 1.25 * Math.max(construction, training + wasmCopies), training };
}

/** Whether fsdp-run can create memory cgroups here: root, and a memory controller (v1 or v2) mounted. */
function cgroupUnavailable(): string | undefined {
  if (process.getuid?.() !== 0)
    return 'needs root: fsdp-run --memory-per-rank creates a memory cgroup per rank';
  const v1 = existsSync('/sys/fs/cgroup/memory/cgroup.procs');
  const v2 =
    existsSync('/sys/fs/cgroup/cgroup.controllers') &&
    readFileSync('/sys/fs/cgroup/cgroup.controllers', 'utf8').includes('memory');
  return v1 || v2 ? undefined : 'no memory cgroup controller is mounted (/sys/fs/cgroup/memory or cgroup v2)';
}

/** Bytes free on the file system holding `directory` (for unprivileged users), and whether it is memory. */
function freeDisk(directory: string): { bytes: number; inMemory: boolean } {
  const stats = statfsSync(directory);
  // TMPFS_MAGIC, RAMFS_MAGIC: files there are memory, charged to the rank's cgroup.
  return {
    bytes: stats.bavail * stats.bsize,
    inMemory: stats.type === 0x01021994 || stats.type === 0x858458f6,
  };
}

/**
 * Why a run is not started, or undefined: no memory cgroups for a capped row, too little disk for
 * an offload row's files (or the disk probe), FSDP's estimate over the cap of a row that shows the
 * refusal, too big for the machine, or predicted over its cap.
 */
export function reasonToSkip(run: PlannedRun, perRank: number, scratch: string): string | undefined {
  if (run.capBytes !== undefined) {
    const why = cgroupUnavailable();
    if (why !== undefined) return why;
  }
  if (run.offloadRow === true) {
    const needed = run.worldSize * (fsdpEstimate(run).diskBytes + settings.diskProbeBytes) + GiB;
    const free = freeDisk(scratch);
    if (free.inMemory)
      return `${scratch} is a tmpfs: offload files there would be memory; set TMPDIR to a directory on a disk`;
    if (needed > free.bytes)
      return `needs ${(needed / GiB).toFixed(1)} GiB of free disk under ${scratch} (${run.worldSize} ranks' offload files, the disk probe and 1 GiB), but ${(free.bytes / GiB).toFixed(1)} GiB is free`;
  }
  if (run.refusedByEstimate === true && run.capBytes !== undefined && !settings.force) {
    const estimate = fsdpEstimate(run);
    const warning = memoryWarning(
      estimate,
      { bytes: run.capBytes, source: 'fsdp-run --memory-per-rank' },
      'full-shard',
      run.worldSize,
      gptUnits(run.model),
      run.offload ?? {},
    );
    if (warning !== undefined) return `refused by the estimate: ${warning}`;
  }
  // What the run may take: its cap where it has one (the kernel enforces it), else the prediction.
  // Leave the reserve available for everything else on the host.
  const bound = Math.min(perRank, run.capBytes ?? Number.POSITIVE_INFINITY) * run.worldSize;
  const reserve = run.capBytes === undefined ? settings.machineReserveBytes : settings.cappedReserveBytes;
  const spare = os.freemem() - reserve;
  if (bound > spare) {
    return `needs up to ${(bound / GiB).toFixed(1)} GiB (${run.worldSize} × ${(bound / run.worldSize / GiB).toFixed(2)}), but only ${(os.freemem() / GiB).toFixed(1)} GiB is available and ${(reserve / GiB).toFixed(0)} GiB stays free for the rest of the machine`;
  }
  if (
    run.capBytes !== undefined &&
    perRank > run.capBytes &&
    run.showsFailure !== true &&
    run.isTarget !== true &&
    !settings.force
  ) {
    return `predicted ${(perRank / GiB).toFixed(2)} GiB per rank > the ${(run.capBytes / GiB).toFixed(0)} GiB cap`;
  }
  return undefined;
}
