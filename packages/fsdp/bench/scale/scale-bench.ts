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
 * Environment: BENCH_SCALE_MODELS=10M,100M,350M (default 10M,100M,350M; the 1.3 B stretch row is always
 * planned, and skipped with the reason unless the machine's free memory holds it; other 1.3 B rows only when named),
 * BENCH_SCALE_ONLY=350M/full-shard/4/cap,100M/full-shard/4 to run only those rows,
 * BENCH_SCALE_FORCE=1 to run capped rows predicted to exceed their cap (the headline runs anyway), BENCH_SCALE_CAP=2G to
 * cap every row (rows keep their own cap where they have one),
 * BENCH_SCALE_STEPS=n measured steps (default 3), BENCH_SCALE_CHECKPOINT=0 to skip checkpoints,
 * BENCH_SCALE_OFFLOAD=only to run only the offload rows (=0: none; default with the others: scale-offload-report.ts),
 * BENCH_SCALE_OFFLOAD_MODEL / _CAP (default 1.3B under 4G) and BENCH_SCALE_OFFLOAD_PEER_MODEL / _PEER_CAP
 * (default 350M under 3G, which holds it without offload too) their models, BENCH_SCALE_OFFLOAD_WORLD_SIZE (default 4), BENCH_SCALE_OFFLOAD_STRETCH=1 the stretch rows (parameters on disk too),
 * BENCH_SCALE_RESERVE=n GiB left available to the rest of the machine (a run that could take more
 * is skipped; default 6, and 2 beside rows under --memory-per-rank, whose caps the kernel enforces), BENCH_SCALE_LOG=file to append every run's stderr (phases, launcher), BENCH_SCALE_DEFERRED=0 to build every model whole before wrapping (default: FSDP runs build it
 * inside nn's deferredInit, so each rank makes only its shards).
 * Writes bench-results/scale.json, scale.md and scale-memory.svg at the repository root, and the
 * offload rows apart in scale-offload.json and scale-offload.md (so a run of them alone leaves the others').
 * scale-plan.ts plans and predicts, scale-run.ts runs a row, scale-rank.ts is one rank,
 * scale-report.ts writes the table and the targets.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRun } from '../../../../bench/internal/run-context';
import { gptParameterCount, scaleModels } from './scale-config';
import { offloadFigures, offloadReportLines, offloadSummary } from './scale-offload-report';
import { GiB, plan } from './scale-plan';
import { memoryPlot } from './scale-plot';
import { median, peakPerRank, reportLines } from './scale-report';
import { diskWriteRate, execute, type RunOutcome } from './scale-run';

const benchmarkRun = startRun();
const repositoryRoot = fileURLToPath(new URL('../../../../', import.meta.url));
const scratch = mkdtempSync(join(os.tmpdir(), 'fsdp-scale-'));
const gib = (bytes: number) => (bytes / GiB).toFixed(2);

const diskBytesPerSecond = diskWriteRate(scratch);
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
  const outcome = execute(run, index, scratch);
  outcomes.push(outcome);
  const how =
    outcome.skipped ??
    outcome.failed ??
    `step ${median(outcome.ranks![0]!.steps.slice(1).map((step) => step.stepMs)).toFixed(0)} ms`;
  process.stderr.write(`${how} (${((performance.now() - started) / 1000).toFixed(0)} s)\n`);
});

const resultsDirectory = join(repositoryRoot, 'bench-results');
if (!existsSync(resultsDirectory)) mkdirSync(resultsDirectory, { recursive: true });
const offloadOutcomes = outcomes.filter((outcome) => outcome.run.offloadRow === true);
const otherOutcomes = outcomes.filter((outcome) => outcome.run.offloadRow !== true);
if (offloadOutcomes.length > 0) {
  const figures = offloadOutcomes.map(offloadFigures);
  const summary = offloadSummary(offloadOutcomes, figures);
  const offloadLines = offloadReportLines(offloadOutcomes, figures, summary);
  writeFileSync(join(resultsDirectory, 'scale-offload.md'), `${offloadLines.join('\n')}\n`);
  writeFileSync(
    join(resultsDirectory, 'scale-offload.json'),
    `${JSON.stringify({ date: new Date().toISOString(), context: benchmarkRun.finish(), loadAverage: os.loadavg(), outcomes: offloadOutcomes, figures: figures.map((row) => row ?? null), summary }, null, 2)}\n`,
  );
  process.stdout.write(`${offloadLines.join('\n')}\n`);
}
if (otherOutcomes.length > 0) {
  const lines = reportLines(otherOutcomes, diskBytesPerSecond);
  writeFileSync(join(resultsDirectory, 'scale.md'), `${lines.join('\n')}\n`);
  writeFileSync(
    join(resultsDirectory, 'scale.json'),
    `${JSON.stringify({ date: new Date().toISOString(), context: benchmarkRun.finish(), diskBytesPerSecond, loadAverage: os.loadavg(), outcomes: otherOutcomes }, null, 2)}\n`,
  );
  writeFileSync(
    join(resultsDirectory, 'scale-memory.svg'),
    memoryPlot(
      otherOutcomes.map((outcome) => ({
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
}
rmSync(scratch, { recursive: true, force: true });
