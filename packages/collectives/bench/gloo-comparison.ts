/**
 * The tcp float32 all-reduce against PyTorch gloo (bench/gloo-all-reduce.py), interleaved per
 * world size: tcp, tcp with FSDP_TCP_BLAS=0 (when OpenBLAS adds the sums), tcp on node:net (when
 * the native path ran, not with --gloo-only), gloo; then the next round. Used by collectives.ts.
 */
import { type GlooRow, runGloo } from './gloo.js';
import type { SweepConfig, SweepRow } from './sweep.js';
import { stats } from './thread-probes.js';

export interface GlooComparison {
  worldSize: number;
  bytes: number;
  tcpMs: number[];
  glooMs: number[];
  /** Rank 0's process CPU per op (every thread, its barrier included), per round. */
  tcpCpuMs: number[];
  glooCpuMs: number[];
  /** The same op on the node:net data path (FSDP_TCP_NATIVE=0), when the native one ran. */
  nodeNetMs: number[];
  /** The same op with the SIMD kernels instead of OpenBLAS (FSDP_TCP_BLAS=0), when BLAS ran. */
  simdMs: number[];
  simdCpuMs: number[];
}

/** Timed and untimed ops per size per round ([Note: warm-up by volume] in sweep.ts). */
export interface GlooIterations {
  iterations: number;
  warmup: number;
  warmupBytes: number;
  timedBytes: number;
}

export interface GlooComparisonSettings {
  worlds: readonly number[];
  sizes: number[];
  rounds: number;
  iterations: GlooIterations;
  /** OpenBLAS adds the sums: also run FSDP_TCP_BLAS=0. */
  blasPath: boolean;
  /** Also run the node:net data path (FSDP_TCP_NATIVE=0). */
  nodeNet: boolean;
}

/** Runs one tcp sweep under fsdp-run with extra environment variables. */
export type TcpSweep = (
  worldSize: number,
  sweep: SweepConfig,
  env: Record<string, string>,
) => Promise<{ rows: SweepRow[] }>;

/** Every (world size, size) row, each side measured `rounds` times, interleaved. */
export async function compareWithGloo(
  settings: GlooComparisonSettings,
  runTcp: TcpSweep,
): Promise<GlooComparison[]> {
  const { sizes, iterations } = settings;
  const sweep = { ops: ['allReduce'], variants: ['float32'], sizes, ...iterations } as SweepConfig;
  const comparisons: GlooComparison[] = [];
  for (const worldSize of settings.worlds) {
    const byBytes = new Map<number, GlooComparison>(
      sizes.map((bytes) => [
        bytes,
        {
          worldSize,
          bytes,
          tcpMs: [],
          glooMs: [],
          tcpCpuMs: [],
          glooCpuMs: [],
          nodeNetMs: [],
          simdMs: [],
          simdCpuMs: [],
        },
      ]),
    );
    // Rows come in size order (the sweep rounds each size down to a multiple of the world size).
    const rowFor = (index: number) => byBytes.get(sizes[index]!);
    for (let round = 0; round < settings.rounds; round++) {
      for (const [index, row] of (await runTcp(worldSize, sweep, {})).rows.entries()) {
        rowFor(index)?.tcpMs.push(row.medianMs);
        if (row.processCpuMs !== undefined) rowFor(index)?.tcpCpuMs.push(row.processCpuMs);
      }
      if (settings.blasPath)
        for (const [index, row] of (await runTcp(worldSize, sweep, { FSDP_TCP_BLAS: '0' })).rows.entries()) {
          rowFor(index)?.simdMs.push(row.medianMs);
          if (row.processCpuMs !== undefined) rowFor(index)?.simdCpuMs.push(row.processCpuMs);
        }
      if (settings.nodeNet)
        for (const [index, row] of (await runTcp(worldSize, sweep, { FSDP_TCP_NATIVE: '0' })).rows.entries())
          rowFor(index)?.nodeNetMs.push(row.medianMs);
      const theirs: GlooRow[] = runGloo(
        worldSize,
        sizes,
        iterations.iterations,
        iterations.warmup,
        iterations.warmupBytes,
        iterations.timedBytes,
      );
      for (const [index, row] of theirs.entries()) {
        rowFor(index)?.glooMs.push(stats(row.ms).median);
        if (row.cpuMs !== undefined) rowFor(index)?.glooCpuMs.push(row.cpuMs);
      }
    }
    comparisons.push(...byBytes.values());
  }
  return comparisons;
}

/** The comparison table: every round of each side, the ratios of the medians, rank 0's CPU per op. */
export function printGlooComparison(
  comparisons: readonly GlooComparison[],
  formatBytes: (bytes: number) => string,
): void {
  console.log(
    `${'W'.padEnd(3)}${'size'.padStart(8)}${'tcp ms'.padStart(20)}${'BLAS=0 ms'.padStart(20)}${'node:net ms'.padStart(18)}${'gloo ms'.padStart(20)}  gloo/tcp  gloo/BLAS=0  node:net/tcp  CPU tcp / BLAS=0 / gloo`,
  );
  for (const row of comparisons) {
    const format = (values: number[]) => values.map((value) => value.toFixed(1)).join(', ');
    const ratio = stats(row.glooMs).median / stats(row.tcpMs).median;
    const nodeNetRatio =
      row.nodeNetMs.length === 0 ? '-' : (stats(row.nodeNetMs).median / stats(row.tcpMs).median).toFixed(2);
    const simdRatio =
      row.simdMs.length === 0 ? '-' : (stats(row.glooMs).median / stats(row.simdMs).median).toFixed(2);
    const cpu = (values: number[]) => (values.length === 0 ? '-' : stats(values).median.toFixed(1));
    console.log(
      `${String(row.worldSize).padEnd(3)}${formatBytes(row.bytes).padStart(8)}${format(row.tcpMs).padStart(20)}${format(row.simdMs).padStart(20)}${format(row.nodeNetMs).padStart(18)}${format(row.glooMs).padStart(20)}  ${ratio.toFixed(2).padEnd(10)}${simdRatio.padEnd(13)}${nodeNetRatio.padEnd(14)}${cpu(row.tcpCpuMs)} / ${cpu(row.simdCpuMs)} / ${cpu(row.glooCpuMs)}`,
    );
  }
}
