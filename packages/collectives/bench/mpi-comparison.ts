/**
 * The mpi backend against Open MPI called directly (mpi4py, bench/mpi4py-collectives.py), both under
 * mpirun, interleaved per world size and round: ours (one mpirun job for every op and size), mpi4py,
 * and the tcp backend's 16 MiB all-reduce (fsdp-run: the default on one host); then the FSDP
 * communication-bound step (the reference GPT, 1 × 16 per rank, W=2, full-shard) on mpi and on tcp,
 * alternating. Used by collectives.ts (`--mpi-only` runs just this).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MPIRUN_FLAGS } from '../test/helpers/run-with-mpirun.js';
import type { TcpSweep } from './gloo-comparison.js';
import { busFactor, type SweepConfig, type SweepRow } from './sweep.js';
import { stats } from './thread-probes.js';

const PYTHON = '/usr/bin/python3';
const MiB = 1 << 20;
const NODE = [process.execPath, '--conditions=@fsdp-ts/source', '--import', 'tsx'];
const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

export interface MpiRow {
  worldSize: number;
  op: string;
  bytes: number;
  /**
   * Median ms per op of each round: the mpi backend, Open MPI through mpi4py's blocking call, and
   * mpi4py's non-blocking call (the same MPI call the backend makes, then Wait).
   */
  mpiMs: number[];
  mpi4pyMs: number[];
  mpi4pyNonBlockingMs: number[];
  /** busbw GB/s from the median of the rounds' medians. */
  mpiBusbw: number;
  mpi4pyBusbw: number;
  mpi4pyNonBlockingBusbw: number;
}

export interface MpiComparison {
  rows: MpiRow[];
  /** The tcp backend's float32 all-reduce at 16 MiB, per world size, ms per round (same rounds). */
  tcpAllReduce: { worldSize: number; bytes: number; tcpMs: number[]; tcpBusbw: number }[];
  /** FSDP's communication-bound step at W=2: tokens/s (median of the measured steps) per round. */
  fsdpStep: { mpi: number[]; tcp: number[] } | undefined;
  mpirunFlags: string[];
}

/** Why the mpi comparison cannot run here, or undefined. */
export function mpiUnavailable(): string | undefined {
  const mpirun = spawnSync('mpirun', ['--version'], { encoding: 'utf8' });
  if (mpirun.status !== 0) return 'mpirun is not installed (apt-get install openmpi-bin)';
  const probe = spawnSync(PYTHON, ['-c', 'import mpi4py, numpy'], { encoding: 'utf8' });
  return probe.status === 0
    ? undefined
    : `${PYTHON} cannot import mpi4py and numpy (apt-get install python3-mpi4py)`;
}

function mpirun(worldSize: number, command: string[], env: Record<string, string> = {}): string {
  const run = spawnSync('mpirun', [...MPIRUN_FLAGS, '-np', String(worldSize), ...command], {
    encoding: 'utf8',
    timeout: 1_800_000,
    maxBuffer: 64 * MiB,
    env: { ...process.env, ...env },
  });
  if (run.status !== 0)
    throw new Error(`mpirun ${command.join(' ')} failed (${run.status}):\n${run.stdout}\n${run.stderr}`);
  return run.stdout;
}

function ours(worldSize: number, sweep: SweepConfig): SweepRow[] {
  const output = mpirun(worldSize, [...NODE, here('./mpi-rank.ts')], {
    FSDP_BENCH_CONFIG: JSON.stringify(sweep),
  });
  const line = output.split('\n').find((each) => each.startsWith('RESULT '));
  if (line === undefined) throw new Error(`the mpi benchmark printed no result:\n${output}`);
  const result = JSON.parse(line.slice(7)) as { backend: string; rows: SweepRow[] };
  if (result.backend !== 'mpi') throw new Error(`the mpirun job ran on ${result.backend}, not mpi`);
  return result.rows;
}

function mpi4py(
  worldSize: number,
  sweep: SweepConfig,
  nonBlocking = false,
): { op: string; bytes: number; ms: number[] }[] {
  const output = mpirun(worldSize, [
    PYTHON,
    here('./mpi4py-collectives.py'),
    JSON.stringify({ ...sweep, nonBlocking }),
  ]);
  return (
    JSON.parse(output.trim().split('\n').at(-1)!) as { rows: { op: string; bytes: number; ms: number[] }[] }
  ).rows;
}

/** tokens/s of full-shard at 1 × 16 per rank, W=2: under mpirun (mpi) or fsdp-run (tcp). */
function fsdpStep(backend: 'mpi' | 'tcp', measuredSteps: number): number {
  const output = join(mkdtempSync(join(tmpdir(), 'fsdp-mpi-bench-')), 'result.json');
  const request = {
    kind: 'full-shard',
    config: { vocabSize: 256, dModel: 256, nLayers: 4, nHeads: 4, seqLen: 128, seed: 0 },
    batch: 1,
    seqLen: 16,
    warmupSteps: 3,
    measuredSteps,
    output,
  };
  const rank = [here('../../fsdp/bench/training-rank.ts'), JSON.stringify([request])];
  if (backend === 'mpi') mpirun(2, [...NODE, ...rank]);
  else {
    const run = spawnSync(
      NODE[0]!,
      [...NODE.slice(1), here('../src/bin/fsdp-run.ts'), '--nproc-per-node', '2', ...rank],
      {
        encoding: 'utf8',
        timeout: 900_000,
        maxBuffer: 64 * MiB,
      },
    );
    if (run.status !== 0) throw new Error(`the tcp FSDP step failed:\n${run.stdout}\n${run.stderr}`);
  }
  return (JSON.parse(readFileSync(output, 'utf8')) as { tokensPerSecond: { median: number } }).tokensPerSecond
    .median;
}

const busbw = (op: string, bytes: number, worldSize: number, ms: number) =>
  (bytes / (ms / 1000) / 1e9) * busFactor(op as 'allReduce', worldSize);

export async function compareWithMpi(
  settings: {
    worlds: readonly number[];
    sizes: number[];
    rounds: number;
    iterations: Omit<SweepConfig, 'ops' | 'variants' | 'sizes'>;
    fsdpSteps: number;
  },
  runTcp: TcpSweep,
): Promise<MpiComparison> {
  const sweep: SweepConfig = {
    ops: ['allReduce', 'allGather', 'reduceScatter'],
    variants: ['float32'],
    sizes: settings.sizes,
    ...settings.iterations,
  };
  const rows: MpiRow[] = [];
  const tcpAllReduce: MpiComparison['tcpAllReduce'] = [];
  for (const worldSize of settings.worlds) {
    const byKey = new Map<string, MpiRow>();
    const tcpMs: number[] = [];
    let tcpBytes = 16 * MiB;
    for (let round = 0; round < settings.rounds; round++) {
      for (const row of ours(worldSize, sweep)) {
        const key = `${row.op} ${row.bytes}`;
        const entry = byKey.get(key) ?? {
          worldSize,
          op: row.op,
          bytes: row.bytes,
          mpiMs: [],
          mpi4pyMs: [],
          mpi4pyNonBlockingMs: [],
          mpiBusbw: 0,
          mpi4pyBusbw: 0,
          mpi4pyNonBlockingBusbw: 0,
        };
        entry.mpiMs.push(row.medianMs);
        byKey.set(key, entry);
      }
      for (const row of mpi4py(worldSize, sweep))
        byKey.get(`${row.op} ${row.bytes}`)?.mpi4pyMs.push(stats(row.ms).median);
      for (const row of mpi4py(worldSize, sweep, true))
        byKey.get(`${row.op} ${row.bytes}`)?.mpi4pyNonBlockingMs.push(stats(row.ms).median);
      const tcp = await runTcp(worldSize, { ...sweep, ops: ['allReduce'], sizes: [16 * MiB] }, {});
      tcpMs.push(tcp.rows[0]!.medianMs);
      tcpBytes = tcp.rows[0]!.bytes;
    }
    for (const row of byKey.values()) {
      row.mpiBusbw = busbw(row.op, row.bytes, worldSize, stats(row.mpiMs).median);
      row.mpi4pyBusbw = busbw(row.op, row.bytes, worldSize, stats(row.mpi4pyMs).median);
      row.mpi4pyNonBlockingBusbw = busbw(row.op, row.bytes, worldSize, stats(row.mpi4pyNonBlockingMs).median);
      rows.push(row);
    }
    const tcpBusbw = busbw('allReduce', tcpBytes, worldSize, stats(tcpMs).median);
    tcpAllReduce.push({ worldSize, bytes: tcpBytes, tcpMs, tcpBusbw });
  }
  let step: MpiComparison['fsdpStep'];
  if (settings.worlds.includes(2) && settings.fsdpSteps > 0) {
    step = { mpi: [], tcp: [] };
    for (let round = 0; round < settings.rounds; round++)
      for (const backend of round % 2 === 0 ? (['mpi', 'tcp'] as const) : (['tcp', 'mpi'] as const))
        step[backend].push(fsdpStep(backend, settings.fsdpSteps));
  }
  return { rows, tcpAllReduce, fsdpStep: step, mpirunFlags: MPIRUN_FLAGS };
}

export function printMpiComparison(comparison: MpiComparison, formatBytes: (bytes: number) => string): void {
  const format = (values: number[]) => values.map((value) => value.toFixed(2)).join(', ');
  console.log(
    `${'W'.padEnd(3)}${'op'.padEnd(15)}${'size'.padStart(8)}${'mpi ms'.padStart(18)}${'mpi4py ms'.padStart(18)}${'mpi busbw'.padStart(11)}${'mpi4py'.padStart(9)}${'mpi4py I*'.padStart(11)}  mpi/mpi4py I*`,
  );
  for (const row of comparison.rows)
    console.log(
      `${String(row.worldSize).padEnd(3)}${row.op.padEnd(15)}${formatBytes(row.bytes).padStart(8)}${format(row.mpiMs).padStart(18)}${format(row.mpi4pyMs).padStart(18)}${row.mpiBusbw.toFixed(2).padStart(11)}${row.mpi4pyBusbw.toFixed(2).padStart(9)}${row.mpi4pyNonBlockingBusbw.toFixed(2).padStart(11)}  ${(row.mpiBusbw / row.mpi4pyNonBlockingBusbw).toFixed(2)}`,
    );
  for (const row of comparison.tcpAllReduce)
    console.log(
      `tcp allReduce W=${row.worldSize} ${formatBytes(row.bytes)}: ${format(row.tcpMs)} ms per round, busbw ${row.tcpBusbw.toFixed(2)} GB/s`,
    );
  if (comparison.fsdpStep !== undefined)
    console.log(
      `FSDP communication-bound step (full-shard, 1 x 16 per rank, W=2), tokens/s per round: mpi ${format(comparison.fsdpStep.mpi)}, tcp ${format(comparison.fsdpStep.tcp)}`,
    );
}

/** The targets: mpi ≥ 0.9× mpi4py; the FSDP step on mpi ≥ tcp; the default (tcp) vs Open MPI at 16 MiB. */
export function mpiTargets(
  comparison: MpiComparison | undefined,
  whyNot: string,
  formatBytes: (bytes: number) => string,
): { target: string; figure: string; met: boolean | undefined }[] {
  if (comparison === undefined)
    return [
      {
        target: 'mpi backend >= 0.9x Open MPI called directly (mpi4py)',
        figure: `not measured (${whyNot})`,
        met: undefined,
      },
    ];
  // The binding adds nothing when the backend matches the same MPI call made directly: mpi4py's
  // non-blocking collective (the backend's call); the blocking call, which Open MPI runs through
  // other algorithms, is printed beside it.
  const targets = comparison.rows.map((row) => {
    const ratio = row.mpiBusbw / row.mpi4pyNonBlockingBusbw;
    return {
      target: `mpi ${row.op} >= 0.9x the same non-blocking call through mpi4py, W=${row.worldSize} ${formatBytes(row.bytes)}`,
      figure: `${ratio.toFixed(2)}x (busbw ${row.mpiBusbw.toFixed(2)} vs ${row.mpi4pyNonBlockingBusbw.toFixed(2)} GB/s; blocking call ${row.mpi4pyBusbw.toFixed(2)})`,
      met: ratio >= 0.9,
    };
  });
  if (comparison.fsdpStep !== undefined) {
    const ratio = stats(comparison.fsdpStep.mpi).median / stats(comparison.fsdpStep.tcp).median;
    targets.push({
      target: 'FSDP communication-bound step (1 x 16 per rank, W=2) on mpi >= tcp',
      figure: `${ratio.toFixed(2)}x (tokens/s ${stats(comparison.fsdpStep.mpi).median.toFixed(0)} vs ${stats(comparison.fsdpStep.tcp).median.toFixed(0)})`,
      met: ratio >= 1,
    });
  }
  for (const row of comparison.tcpAllReduce) {
    const openMpi = comparison.rows.find(
      (each) => each.worldSize === row.worldSize && each.op === 'allReduce' && each.bytes === row.bytes,
    );
    if (openMpi === undefined) continue;
    const ratio = row.tcpBusbw / openMpi.mpi4pyBusbw;
    targets.push({
      target: `default backend (tcp) allReduce >= 1.0x Open MPI (mpi4py), W=${row.worldSize} ${formatBytes(row.bytes)}`,
      figure: `${ratio.toFixed(2)}x (busbw ${row.tcpBusbw.toFixed(2)} vs ${openMpi.mpi4pyBusbw.toFixed(2)} GB/s); the collectives README says which backend to pick`,
      met: ratio >= 1,
    });
  }
  return targets;
}
