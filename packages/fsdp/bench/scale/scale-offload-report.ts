/**
 * The offload rows' figures and report (`npm run bench:scale`, issue 33): each trained row's step
 * time split into compute / communication / optimizer / offload I/O, the bytes the offload moved
 * and the rate it reached against the disk measured by the same ranks in the same run, the
 * step-time cost of offload at the peer model, and the headline's verdicts. The figures go into
 * bench-results/scale-offload.json as they are printed, so bench:report renders them without
 * recomputing (bench/report/benchmarks.ts).
 */
import type { ScaleRankResult } from './scale-config';
import { GiB, runKey, settings } from './scale-plan';
import { median, peakPerRank } from './scale-report';
import type { RunOutcome } from './scale-run';

type Step = ScaleRankResult['steps'][number];

/** One trained offload row, per rank the slowest (times) or the sum over ranks (bytes). */
export interface OffloadFigures {
  key: string;
  stepMs: number;
  cpuMs: number;
  /** Forward and backward without the communication waits. */
  computeMs: number;
  /** All-gather and reduce-scatter waits. */
  communicationMs: number;
  /** optimizer.step() without the offload's I/O: the kernels. */
  optimizerMs: number;
  /** The offload's I/O on the main thread: reads, waits for the reader, writes, fdatasyncs, CRC-32s. */
  offloadIoMs: number;
  /** The reader thread's reads and CRC-32s, overlapped with backward and the optimizer. */
  offloadOverlappedMs: number;
  /** Time in read and write calls on either thread: what the disk's rate is compared with. */
  offloadTransferMs: number;
  /** Per step, every rank: what the offload read (verify and step passes) and wrote. */
  offloadReadBytes: number;
  offloadWrittenBytes: number;
  /** Per step, every rank: what reached the storage device (/proc/self/io), page cache excluded. */
  storageReadBytes: number;
  storageWrittenBytes: number;
  /** The disk probe around the run: every rank writing, then reading back uncached, bytes/s in all. */
  diskWriteBytesPerSecond?: number;
  diskReadBytesPerSecond?: number;
  /** The time the probed disk needs for the offload's bytes over the offload's read and write time (target ≥ 0.6). */
  ofDiskRate?: number;
  /** The cgroup's peak (page cache included, clean pages too) and the largest RSS, per rank. */
  peakPerRankBytes?: number;
  peakRssBytes: number;
}

/**
 * The offload's I/O of one step (FSDP's offloadStatistics): `ms` is what the main thread spent on
 * it (reads, waits for the I/O thread, writes with their fdatasyncs, CRC-32s): the step's
 * cost, part of its backward and optimizer time (not added to them); `overlappedMs` the I/O
 * thread's reading, writing and checksumming beside backward and the optimizer; `transferMs`
 * the time in read and write calls on either thread (with their CRC-32s), which the disk's rate
 * is compared with.
 */
export function offloadStepIo(step: Step): {
  ms: number;
  overlappedMs: number;
  transferMs: number;
  readBytes: number;
  writtenBytes: number;
} {
  const statistics = step.offload;
  if (statistics === undefined)
    return { ms: 0, overlappedMs: 0, transferMs: 0, readBytes: 0, writtenBytes: 0 };
  return {
    ms: statistics.readMs + statistics.waitMs + statistics.writeMs + statistics.checksumMs,
    overlappedMs: statistics.readerMs + statistics.writerMs,
    transferMs: statistics.readMs + statistics.readerMs + statistics.writeMs + statistics.writerMs,
    readBytes: statistics.bytesRead,
    writtenBytes: statistics.bytesWritten,
  };
}

/** The median over measured steps (after the warm-up) of `pick`, on the rank where it is largest. */
const slowest = (outcome: RunOutcome, pick: (step: Step) => number) =>
  Math.max(...outcome.ranks!.map((rank) => median(rank.steps.slice(1).map(pick))));
/** The median over measured steps of `pick` summed over the ranks. */
const summed = (outcome: RunOutcome, pick: (step: Step) => number) =>
  outcome.ranks!.reduce((sum, rank) => sum + median(rank.steps.slice(1).map(pick)), 0);

export function offloadFigures(outcome: RunOutcome): OffloadFigures | undefined {
  if (outcome.ranks === undefined || outcome.ranks.some((rank) => rank.steps.length < 2)) return undefined;
  const io = (step: Step) => offloadStepIo(step);
  const offloadIoMs = slowest(outcome, (step) => io(step).ms);
  const offloadTransferMs = slowest(outcome, (step) => io(step).transferMs);
  const figures: OffloadFigures = {
    key: runKey(outcome.run),
    stepMs: slowest(outcome, (step) => step.stepMs),
    cpuMs: slowest(outcome, (step) => step.cpuMs),
    computeMs: slowest(outcome, (step) => step.computeMs),
    communicationMs: slowest(outcome, (step) => step.allGatherWaitMs + step.reductionWaitMs),
    optimizerMs: slowest(outcome, (step) => step.optimizerMs - io(step).ms),
    offloadIoMs,
    offloadOverlappedMs: slowest(outcome, (step) => io(step).overlappedMs),
    offloadTransferMs,
    offloadReadBytes: summed(outcome, (step) => io(step).readBytes),
    offloadWrittenBytes: summed(outcome, (step) => io(step).writtenBytes),
    storageReadBytes: summed(outcome, (step) => step.storageReadBytes),
    storageWrittenBytes: summed(outcome, (step) => step.storageWrittenBytes),
    peakRssBytes: Math.max(...outcome.ranks.map((rank) => rank.peakRssBytes)),
  };
  const peak = peakPerRank(outcome);
  if (peak !== undefined) figures.peakPerRankBytes = peak;
  const probes = outcome.ranks.map((rank) => rank.diskProbe);
  if (probes.every((probe) => probe !== undefined && probe.writeMs.length > 0)) {
    // Every rank's probe between the same barriers: the first rank's times are the slowest's.
    const probe = probes[0]!;
    const total = probe.bytes * outcome.ranks.length;
    const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
    figures.diskWriteBytesPerSecond = total / (mean(probe.writeMs) / 1000);
    figures.diskReadBytesPerSecond = total / (mean(probe.readMs) / 1000);
    if (offloadTransferMs > 0) {
      const diskSeconds =
        figures.offloadWrittenBytes / figures.diskWriteBytesPerSecond +
        figures.offloadReadBytes / figures.diskReadBytesPerSecond;
      figures.ofDiskRate = diskSeconds / (offloadTransferMs / 1000);
    }
  }
  return figures;
}

/** What the issue asks of the offload rows, from this run. */
export interface OffloadSummary {
  /** The headline row's key and outcome ('trained', or why not). */
  headline?: { key: string; outcome: string; capBytes: number; peakPerRankBytes?: number };
  /** The same model and cap without offload: 'refused by the estimate', 'killed at the cap', … */
  withoutOffload?: { key: string; outcome: string };
  /** The peer model's step time with optimizer state on disk over without (wall clock and CPU). */
  cost?: { model: string; stepRatio: number; cpuRatio: number; withMs: number; withoutMs: number };
  /** The headline's offload rate against the probed disk (≥ 0.6 wanted). */
  ofDiskRate?: number;
}

const outcomeText = (outcome: RunOutcome) =>
  outcome.skipped !== undefined
    ? outcome.skipped.startsWith('refused by the estimate')
      ? outcome.skipped
      : `skipped: ${outcome.skipped}`
    : outcome.failed !== undefined
      ? /out-of-memory killer/.test(outcome.failed)
        ? `killed at the cap: ${outcome.failed}`
        : `failed: ${outcome.failed}`
      : 'trained';

export function offloadSummary(
  outcomes: RunOutcome[],
  figures: (OffloadFigures | undefined)[],
): OffloadSummary {
  const summary: OffloadSummary = {};
  const find = (model: string, tag: string) =>
    outcomes.findIndex((outcome) => outcome.run.model === model && outcome.run.tag === tag);
  const headline = outcomes.findIndex(
    (outcome) => outcome.run.isTarget === true && outcome.run.offload !== undefined,
  );
  if (headline >= 0) {
    const outcome = outcomes[headline]!;
    const peak = figures[headline]?.peakPerRankBytes;
    summary.headline = {
      key: runKey(outcome.run),
      outcome: outcomeText(outcome),
      capBytes: outcome.run.capBytes ?? 0,
      ...(peak === undefined ? {} : { peakPerRankBytes: peak }),
    };
    const ofDisk = figures[headline]?.ofDiskRate;
    if (ofDisk !== undefined) summary.ofDiskRate = ofDisk;
    const without = find(outcome.run.model, 'no-offload');
    if (without >= 0)
      summary.withoutOffload = {
        key: runKey(outcomes[without]!.run),
        outcome: outcomeText(outcomes[without]!),
      };
  }
  const peer = figures[find(settings.offloadPeerModel, 'offload-peer')];
  const offloaded = figures[find(settings.offloadPeerModel, 'offload-state-disk')];
  if (peer !== undefined && offloaded !== undefined)
    summary.cost = {
      model: settings.offloadPeerModel,
      stepRatio: offloaded.stepMs / peer.stepMs,
      cpuRatio: offloaded.cpuMs / peer.cpuMs,
      withMs: offloaded.stepMs,
      withoutMs: peer.stepMs,
    };
  return summary;
}

const gib = (bytes: number | undefined) => (bytes === undefined ? '–' : (bytes / GiB).toFixed(2));
const seconds = (ms: number) => (ms / 1000).toFixed(1);
const rate = (bytes: number | undefined) => (bytes === undefined ? '–' : (bytes / 1e9).toFixed(2));

/** The row's FSDP options that differ from the defaults ('defaults' when none do). */
function fsdpSettingsText(run: RunOutcome['run']): string {
  const settingsText = [
    ...((run.activationCheckpointing ?? settings.recomputeEverywhere) ? ['activation checkpointing'] : []),
    ...(run.backwardPrefetch === false ? ['backwardPrefetch: false'] : []),
    ...(run.forwardPrefetch === false ? ['forwardPrefetch: false'] : []),
  ];
  return settingsText.length === 0 ? 'defaults' : settingsText.join(', ');
}

/** The offload rows as markdown: one line per row, then the issue's targets met / not met. */
export function offloadReportLines(
  outcomes: RunOutcome[],
  figures: (OffloadFigures | undefined)[],
  summary: OffloadSummary,
): string[] {
  const lines = [
    '## Offload rows',
    '',
    `Full-shard W=${settings.offloadWorldSize} under fsdp-run --memory-per-rank, AdamW, ${settings.offloadMeasuredSteps} measured steps after 1 warm-up, times in s (the slowest rank's median step); bytes per step over every rank; the cgroup peak counts the page cache, clean pages the kernel reclaims under the cap included, RSS does not; reads the page cache serves (storage read < offload read) let the offload pass the disk's rate; the disk probed by the same ranks at once before and after training (${(settings.diskProbeBytes / 2 ** 20).toFixed(0)} MiB each written with fdatasync every 64 MiB + fsync, then read back with O_DIRECT).`,
    '',
    '| row | FSDP settings | cap | predicted peak | cgroup peak | peak RSS | step | compute | communication | optimizer | offload I/O (overlapped) | offload GB read / written | storage GB read / written | disk GB/s write / read | of the disk rate | outcome |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  outcomes.forEach((outcome, index) => {
    const row = figures[index];
    const cells =
      row === undefined
        ? Array.from({ length: 9 }, () => '–')
        : [
            seconds(row.stepMs),
            seconds(row.computeMs),
            seconds(row.communicationMs),
            seconds(row.optimizerMs),
            `${seconds(row.offloadIoMs)} (${seconds(row.offloadOverlappedMs)})`,
            `${rate(row.offloadReadBytes)} / ${rate(row.offloadWrittenBytes)}`,
            `${rate(row.storageReadBytes)} / ${rate(row.storageWrittenBytes)}`,
            `${rate(row.diskWriteBytesPerSecond)} / ${rate(row.diskReadBytesPerSecond)}`,
            row.ofDiskRate === undefined ? '–' : `${row.ofDiskRate.toFixed(2)}×`,
          ];
    lines.push(
      `| ${runKey(outcome.run)} | ${fsdpSettingsText(outcome.run)} | ${gib(outcome.run.capBytes)} | ${gib(outcome.predictedPerRankBytes)} | ${gib(peakPerRank(outcome))} | ${gib(row?.peakRssBytes)} | ${cells.join(' | ')} | ${outcomeText(outcome).replaceAll('|', '/')} |`,
    );
  });
  const verdict = (met: boolean | undefined) =>
    met === undefined ? 'not measured' : met ? 'met' : 'not met';
  const { headline, withoutOffload, cost, ofDiskRate } = summary;
  lines.push(
    '',
    '### Offload targets',
    '',
    `- ${headline?.key ?? 'the offload headline'} trains under ${gib(headline?.capBytes)} GiB per rank: ${verdict(headline === undefined ? undefined : headline.outcome === 'trained')}${headline === undefined ? '' : ` (${headline.outcome}; peak ${gib(headline.peakPerRankBytes)} GiB)`}; without offload: ${withoutOffload?.outcome ?? 'not run'}`,
    `- offload I/O ≥ 0.6× the disk rate measured in the same run: ${verdict(ofDiskRate === undefined ? undefined : ofDiskRate >= 0.6)}${ofDiskRate === undefined ? '' : ` (${ofDiskRate.toFixed(2)}×)`}`,
    cost === undefined
      ? '- step-time cost of optimizer state on disk: not measured'
      : `- step-time cost of optimizer state on disk at ${cost.model}: ${seconds(cost.withoutMs)} → ${seconds(cost.withMs)} s, ${cost.stepRatio.toFixed(2)}× the step without offload (CPU per step ${cost.cpuRatio.toFixed(2)}×)`,
  );
  return lines;
}
