/**
 * What `npm run bench:scale` runs (see scale-bench.ts for the environment variables): the rows,
 * their keys, and the memory each is predicted to take per rank before it starts.
 */
import os from 'node:os';
import { estimateMemoryPerRank } from '@fsdp-ts/fsdp';
import {
  gptParameterCount,
  gptUnitSizes,
  type ScaleModelName,
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
};

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
  /** Tells this row apart from another of the same model, strategy, world size and capping. */
  tag?: string;
}

export function plan(): PlannedRun[] {
  const runs: PlannedRun[] = [];
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
  if (cap !== undefined)
    for (const run of runs)
      run.capBytes ??= Number.parseFloat(cap) * (/g/i.test(cap) ? GiB : /m/i.test(cap) ? MiB : 1);
  // A capped generic row and a dedicated row of the same key: keep the dedicated one (listed later).
  const unique = [...new Map(runs.map((run) => [runKey(run), run])).values()];
  const only = process.env.BENCH_SCALE_ONLY?.split(',');
  return only === undefined ? unique : unique.filter((run) => only.includes(runKey(run)));
}

/** '350M/full-shard/4', '350M/full-shard/4/cap' or '350M/full-shard/4/cap/checkpoint'. */
export function runKey(run: PlannedRun): string {
  return `${run.model}/${run.strategy}/${run.worldSize}${run.capBytes === undefined ? '' : '/cap'}${run.tag === undefined ? '' : `/${run.tag}`}`;
}

/** Predicted peak bytes per rank: the runtime, plus the larger of building the whole model and training it. */
export function predict(run: PlannedRun): { perRank: number; training: number } {
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
  const builtWhole = run.strategy === 'single' || !settings.deferred;
  const construction = builtWhole ? 4 * parameters + training / 4 : training / 4;
  // 25% for activations, garbage not yet collected and the allocator's slack (measured at 10 M).
  return { perRank: runtime.bytes + 1.25 * Math.max(construction, training + wasmCopies), training };
}

/** Why a run is not started (too big for the machine, or predicted over its cap), or undefined. */
export function reasonToSkip(run: PlannedRun, perRank: number): string | undefined {
  // What the run may take: its cap where it has one (the kernel enforces it), else the prediction.
  // Leave the reserve available for everything else on the host.
  const bound = Math.min(perRank, run.capBytes ?? Number.POSITIVE_INFINITY) * run.worldSize;
  const spare = os.freemem() - settings.machineReserveBytes;
  if (bound > spare) {
    return `needs up to ${(bound / GiB).toFixed(1)} GiB (${run.worldSize} × ${(bound / run.worldSize / GiB).toFixed(2)}), but only ${(os.freemem() / GiB).toFixed(1)} GiB is available and ${(settings.machineReserveBytes / GiB).toFixed(0)} GiB stays free for the rest of the machine`;
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
