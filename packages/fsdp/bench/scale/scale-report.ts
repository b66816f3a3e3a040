/**
 * The report of `npm run bench:scale`: one table row per run (memory, time split, checkpoint
 * rates next to the disk's, launch time, outcome), RSS per phase, and the issue's targets each
 * printed met / not met / not measured.
 */
import os from 'node:os';
import {
  gptParameterCount,
  type ScaleModelName,
  type ScaleRankResult,
  type ScaleStrategy,
  scaleModels,
} from './scale-config';
import { GiB, runKey, settings } from './scale-plan';
import type { RunOutcome } from './scale-run';

export const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
const gib = (bytes: number | undefined) => (bytes === undefined ? '–' : (bytes / GiB).toFixed(2));

/** Peak memory per rank: the launcher's cgroup peak when capped, else the ranks' peak RSS. */
export function peakPerRank(outcome: RunOutcome): number | undefined {
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

/**
 * The disk rate a run's save is compared with: every rank writing its checkpoint file's size at
 * once, right before and right after the save (disk-rate.ts); the mean of the two.
 */
function diskRateFor(outcome: RunOutcome): number | undefined {
  const saves = outcome.ranks?.map((rank) => rank.checkpoint);
  if (saves === undefined || saves.some((save) => save === undefined)) return undefined;
  const total = saves.reduce((sum, save) => sum + save!.diskBytesPerRank, 0);
  const before = Math.max(...saves.map((save) => save!.diskBeforeMs));
  const after = Math.max(...saves.map((save) => save!.diskAfterMs));
  return total / ((before + after) / 2 / 1000);
}

/** The checkpoint's bytes (every rank's files) per second of the save (between barriers). */
function saveRate(outcome: RunOutcome): number | undefined {
  const saves = outcome.ranks?.map((rank) => rank.checkpoint);
  if (saves === undefined || saves.some((save) => save === undefined)) return undefined;
  return saves[0]!.bytes / (Math.max(...saves.map((save) => save!.saveMs)) / 1000);
}

/** The checkpoint's bytes per second of the load (between barriers), or undefined. */
function loadRate(outcome: RunOutcome): number | undefined {
  const saves = outcome.ranks?.map((rank) => rank.checkpoint);
  if (saves === undefined || saves.some((save) => save === undefined || !Number.isFinite(save.loadMs)))
    return undefined;
  return saves[0]!.bytes / (Math.max(...saves.map((save) => save!.loadMs)) / 1000);
}

const measuredStepMs = (
  outcome: RunOutcome | undefined,
  pick: (step: ScaleRankResult['steps'][number]) => number = (step) => step.stepMs,
) =>
  outcome?.ranks === undefined
    ? undefined
    : Math.max(...outcome.ranks.map((rank) => median(rank.steps.slice(1).map(pick))));

/** The report (markdown lines): the table, RSS per phase, and the targets met / not met. */
export function reportLines(outcomes: RunOutcome[], startDiskBytesPerSecond: number): string[] {
  const loadText = loadAverageText();
  const lines = [
    `# Scale benchmark (${new Date().toISOString()})`,
    '',
    `Machine: ${os.cpus().length} cores, ${(os.totalmem() / GiB).toFixed(0)} GiB; load average at the end ${loadText}. Disk sequential write at the start ${(startDiskBytesPerSecond / 1e9).toFixed(2)} GB/s (one writer, 512 MiB + fsync); each checkpoint is compared with the disk measured right before and after its save with the same bytes from the same number of writers at once (every rank writing its file's size; 8 MiB writes, fdatasync every 64 MiB, fsync at the end, as the checkpoint writer does). wasm backend, batch 1 × 64 per rank, AdamW, ${settings.measuredSteps} measured steps after 1 warm-up; FSDP runs build the model ${settings.deferred ? 'inside deferredInit (each rank makes only its shards)' : 'whole before wrapping'}. Memory in GiB per rank; "P+G+opt" is the live bytes of parameters, gradients and AdamW state on the rank holding most.`,
    '',
    '| model | parameters | run | cap | predicted peak | measured peak | P+G+opt | FSDP estimate | runtime | wrap s | step ms (median) | CPU ms per step | compute | all-gather wait | reduce wait | optimizer | save s (GB/s, × the disk rate around it) | load s (GB/s) | launch → first step s | outcome |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
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
    const disk = diskRateFor(outcome);
    const saveText =
      save === undefined || rate === undefined || disk === undefined
        ? '–'
        : `${(save.saveMs / 1000).toFixed(1)} (${(rate / 1e9).toFixed(2)}, ${(rate / disk).toFixed(2)}× of ${(disk / 1e9).toFixed(2)})`;
    const load = loadRate(outcome);
    const loadText =
      save === undefined || load === undefined
        ? '–'
        : `${(save.loadMs / 1000).toFixed(1)} (${(load / 1e9).toFixed(2)})`;
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
      `| ${run.model} | ${(parameters / 1e6).toFixed(0)} M | ${run.strategy} W=${run.worldSize} | ${run.capBytes === undefined ? '–' : gib(run.capBytes)} | ${gib(outcome.predictedPerRankBytes)} | ${gib(peakPerRank(outcome))} | ${gib(trainingStatePerRank(outcome))} | ${gib(first?.estimateBytes)} | ${gib(first?.runtimeRssBytes)} | ${wrap} | ${stat((step) => step.stepMs)} | ${stat((step) => step.cpuMs)} | ${stat((step) => step.computeMs)} | ${stat((step) => step.allGatherWaitMs)} | ${stat((step) => step.reductionWaitMs)} | ${stat((step) => step.optimizerMs)} | ${saveText} | ${loadText} | ${outcome.launchToFirstStepMs === undefined ? '–' : (outcome.launchToFirstStepMs / 1000).toFixed(1)} | ${result} |`,
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
  lines.push('', ...targetLines(outcomes, loadText));
  return lines;
}

const loadAverageText = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ');

/** The issue's targets, each met / not met / not measured, from this run's rows. */
function targetLines(all: RunOutcome[], loadText: string): string[] {
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
    outcome?.ranks?.every((rank) => rank.steps.length === 1 + settings.measuredSteps) === true;
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
    `- 350 M full-shard W=4 trains ${settings.measuredSteps} steps under a 2 GiB cap per rank: ${verdict(headline === undefined ? undefined : trained(headline))}` +
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
  // 3. Step time at W=4 grows linearly with parameters from 100 M to 350 M (within 20%); the
  // CPU time per step too (less sensitive to what else the machine runs).
  const at100 = find('100M', 'full-shard', 4);
  const at350 = headline ?? find('350M', 'full-shard', 4);
  const step100 = measuredStepMs(at100);
  const step350 = measuredStepMs(at350);
  const growth = gptParameterCount(scaleModels['350M']) / gptParameterCount(scaleModels['100M']);
  if (step100 !== undefined && step350 !== undefined) {
    const ratio = step350 / step100 / growth;
    const cpu100 = measuredStepMs(at100, (step) => step.cpuMs)!;
    const cpu350 = measuredStepMs(at350, (step) => step.cpuMs)!;
    out.push(
      `- step time 100 M → 350 M at W=4: ${(step100 / 1000).toFixed(1)} → ${(step350 / 1000).toFixed(1)} s, ${ratio.toFixed(2)} of linear in parameters (×${growth.toFixed(2)}; within 20%: ${verdict(Math.abs(ratio - 1) <= 0.2)}; wall clock, load ${loadText}); CPU per step and rank ${(cpu100 / 1000).toFixed(1)} → ${(cpu350 / 1000).toFixed(1)} s, ${(cpu350 / cpu100 / growth).toFixed(2)} of linear`,
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
  const disk = saved === undefined ? undefined : diskRateFor(saved);
  const load = saved === undefined ? undefined : loadRate(saved);
  out.push(
    rate === undefined || disk === undefined
      ? '- saveCheckpoint at 350 M ≥ 50% of the disk rate: not measured'
      : `- saveCheckpoint at 350 M (${saved!.run.strategy} W=${saved!.run.worldSize}, cap ${gib(saved!.run.capBytes)} GiB): ${(rate / 1e9).toFixed(2)} GB/s against the disk's ${(disk / 1e9).toFixed(2)} GB/s (the same bytes from ${saved!.run.worldSize} writers at once, right before and after the save), ${(rate / disk).toFixed(2)}× (≥ 0.5: ${verdict(rate / disk >= 0.5)}); loaded at ${load === undefined ? '–' : (load / 1e9).toFixed(2)} GB/s; peak ${gib(peakPerRank(saved!))} GiB per rank`,
  );
  // Stretch: 1.3 B at W=4 under 6 GiB per rank where the machine allows.
  const stretch = find('1.3B', 'full-shard', 4);
  if (stretch !== undefined)
    out.push(
      `- stretch, 1.3 B full-shard W=4 under ${gib(stretch.run.capBytes)} GiB per rank: ${stretch.skipped !== undefined ? `skipped (${stretch.skipped}; predicted ${gib(stretch.predictedPerRankBytes)} GiB per rank)` : stretch.failed !== undefined ? `failed: ${stretch.failed}` : `trained (peak ${gib(peakPerRank(stretch))} GiB per rank)`}`,
    );
  out.push('', `Load average: ${loadText}.`);
  return out;
}
