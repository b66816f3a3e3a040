/** The BENCH_PHASES=1 table: one row per run, the median of each phase column (see [Note: phase profile]). */
import type { RunResult } from './bench-config';
import { type PhaseSamples, phaseNames } from './phase-profile';

/** Pools the per-step phase samples of several rounds of one row. */
export function poolPhases(parts: readonly PhaseSamples[]): PhaseSamples {
  return Object.fromEntries(
    phaseNames.map((name) => [name, parts.flatMap((part) => part[name])]),
  ) as unknown as PhaseSamples;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1] ?? Number.NaN;
}

export function phaseTable(rows: readonly RunResult[]): string[] {
  const lines = [
    `| run | W | ${phaseNames.join(' | ')} | main-thread CPU (sum of phases) |`,
    `| --- | --- | ${phaseNames.map(() => '---').join(' | ')} | --- |`,
  ];
  for (const row of rows) {
    const phases = row.phases!;
    const mainCpu = median(
      phases.forward.map(
        (forward, step) =>
          forward + phases.backward[step]! + phases.optimizer[step]! + phases.zeroGrad[step]!,
      ),
    );
    const cells = phaseNames.map((name) => median(phases[name]).toFixed(1));
    lines.push(`| ${row.kind} | ${row.worldSize} | ${cells.join(' | ')} | ${mainCpu.toFixed(1)} |`);
  }
  return lines;
}
