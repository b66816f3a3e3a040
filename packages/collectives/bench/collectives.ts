/**
 * `npm run bench:collectives`: bus bandwidth of every op, float32 and bfloat16 (and float32 with
 * bfloat16 on the wire), 256 KiB to 64 MiB, world sizes 2 and 4, on the shm and tcp backends;
 * plus single-core memcpy and a bidirectional raw-socket transfer measured in the same run.
 * Options: --quick (256 KiB, 4 MiB, 16 MiB only), --backends shm,tcp, --worlds 2,4.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { spawnThreadRanks } from '../src/index.js';
import { runWithLauncher } from '../test/helpers/run-with-launcher.js';
import type { RawSocketResult } from './raw-socket.js';
import type { SweepConfig, SweepRow } from './sweep.js';

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(name);
const listOption = (name: string, fallback: string) => (argv[argv.indexOf(name) + 1] ?? fallback).split(',');
const quick = flag('--quick');
const backends = argv.includes('--backends') ? listOption('--backends', 'shm,tcp') : ['shm', 'tcp'];
const worlds = (argv.includes('--worlds') ? listOption('--worlds', '2,4') : ['2', '4']).map(Number);
const MiB = 1 << 20;
const config: SweepConfig = {
  ops: ['allReduce', 'allGather', 'reduceScatter', 'broadcast'],
  variants: ['float32', 'bfloat16', 'f32/bf16-wire'],
  sizes: quick ? [MiB / 4, 4 * MiB, 16 * MiB] : [MiB / 4, MiB, 4 * MiB, 16 * MiB, 64 * MiB],
  iterations: 10,
  warmup: 2,
};

function stats(values: number[]): { median: number; best: number; worst: number } {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    median: sorted[Math.floor(sorted.length / 2)]!,
    best: sorted[sorted.length - 1]!,
    worst: sorted[0]!,
  };
}

function memcpy(): { median: number; best: number; worst: number } {
  const source = new Uint8Array(64 * MiB).fill(3);
  const target = new Uint8Array(64 * MiB);
  const rates: number[] = [];
  for (let iteration = 0; iteration < 13; iteration++) {
    const start = performance.now();
    target.set(source);
    const ms = performance.now() - start;
    if (iteration >= 3) rates.push(source.length / (ms / 1000) / 1e9);
  }
  return stats(rates);
}

interface BackendRows {
  backend: string;
  worldSize: number;
  rows: SweepRow[];
  rawSocket?: RawSocketResult | undefined;
}

async function shm(worldSize: number): Promise<BackendRows> {
  const results = (await spawnThreadRanks(
    worldSize,
    new URL('./shm-rank.ts', import.meta.url),
    'shmBenchRank',
    {
      args: { ...config, variants: config.variants.filter((variant) => variant !== 'f32/bf16-wire') },
      timeoutMs: 1_800_000,
    },
  )) as SweepRow[][];
  return { backend: 'shm', worldSize, rows: results[0]! };
}

async function tcp(worldSize: number): Promise<BackendRows> {
  const run = await runWithLauncher(worldSize, new URL('./tcp-rank.ts', import.meta.url), [], {
    timeoutMs: 1_800_000,
    env: { FSDP_BENCH_CONFIG: JSON.stringify(config) },
  });
  const result = run.results.get(0) as { rows: SweepRow[]; rawSocket?: RawSocketResult } | undefined;
  if (run.code !== 0 || result === undefined)
    throw new Error(`tcp benchmark with ${worldSize} ranks failed:\n${run.output}`);
  return { backend: 'tcp', worldSize, rows: result.rows, rawSocket: result.rawSocket };
}

function formatBytes(bytes: number): string {
  return bytes >= MiB ? `${(bytes / MiB).toFixed(0)} MiB` : `${(bytes / 1024).toFixed(0)} KiB`;
}

const startedAt = new Date().toISOString();
const loadBefore = loadavg()[0]!;
const copy = memcpy();
console.log(
  `single-core memcpy (64 MiB Uint8Array.set): median ${copy.median.toFixed(2)} GB/s [${copy.worst.toFixed(2)} .. ${copy.best.toFixed(2)}]`,
);
const measured: BackendRows[] = [];
for (const backend of backends) {
  for (const worldSize of worlds) {
    const result = backend === 'shm' ? await shm(worldSize) : await tcp(worldSize);
    measured.push(result);
    if (result.rawSocket !== undefined) {
      const raw = result.rawSocket.perDirection;
      console.log(
        `raw node:net, 16 MiB each way at once, per direction: median ${raw.median.toFixed(2)} GB/s [${raw.worst.toFixed(2)} .. ${raw.best.toFixed(2)}]`,
      );
    }
    console.log(`\n${backend} world size ${worldSize}: busbw GB/s (median [min .. max]), ms per op (median)`);
    console.log(`${'op'.padEnd(14)}${'variant'.padEnd(15)}${'size'.padStart(8)}${'ms'.padStart(10)}  busbw`);
    for (const row of result.rows) {
      console.log(
        `${row.op.padEnd(14)}${row.variant.padEnd(15)}${formatBytes(row.bytes).padStart(8)}${row.medianMs.toFixed(2).padStart(10)}  ${row.busbw.toFixed(2)} [${row.busbwWorst.toFixed(2)} .. ${row.busbwBest.toFixed(2)}]`,
      );
    }
  }
}

// Targets (world size 2, 16 MiB float32).
const pick = (backend: string, op: string, variant: string) =>
  measured
    .find((result) => result.backend === backend && result.worldSize === 2)
    ?.rows.find((row) => row.op === op && row.variant === variant && row.bytes === 16 * MiB);
const raw = measured.find((result) => result.rawSocket !== undefined)?.rawSocket?.perDirection.median;
const targets: Record<string, unknown>[] = [];
for (const op of ['allReduce', 'allGather', 'reduceScatter']) {
  const tcpRow = pick('tcp', op, 'float32');
  const wireRow = pick('tcp', op, 'f32/bf16-wire');
  const shmRow = pick('shm', op, 'float32');
  if (tcpRow !== undefined && raw !== undefined)
    targets.push({
      target: `tcp ${op} >= 80% raw socket`,
      busbw: tcpRow.busbw,
      ratio: tcpRow.busbw / raw,
      met: tcpRow.busbw >= 0.8 * raw,
    });
  if (tcpRow !== undefined && wireRow !== undefined)
    targets.push({
      target: `tcp ${op} bf16 wire >= 1.6x f32`,
      busbw: wireRow.busbw,
      ratio: wireRow.busbw / tcpRow.busbw,
      met: wireRow.busbw >= 1.6 * tcpRow.busbw,
    });
  if (shmRow !== undefined)
    targets.push({ target: `shm ${op} >= 6 GB/s`, busbw: shmRow.busbw, met: shmRow.busbw >= 6 });
}
console.log('\nTargets (world size 2, 16 MiB):');
for (const target of targets) {
  const ratio = typeof target.ratio === 'number' ? ` (ratio ${target.ratio.toFixed(2)})` : '';
  console.log(
    `  ${target.met ? 'met    ' : 'NOT met'} ${target.target}: ${(target.busbw as number).toFixed(2)} GB/s${ratio}`,
  );
}
const loadAfter = loadavg()[0]!;
console.log(
  `\nLoad average ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after, on ${cpus().length} cores shared with other agents: figures are noisy.`,
);
const resultsDirectory = fileURLToPath(new URL('../../../bench-results/', import.meta.url));
mkdirSync(resultsDirectory, { recursive: true });
const file = `${resultsDirectory}collectives${quick ? '-quick' : ''}.json`;
writeFileSync(
  file,
  `${JSON.stringify({ startedAt, machine: { cores: cpus().length, loadBefore, loadAfter, note: 'shared with other agents; noisy' }, config, memcpy: copy, measured, targets }, null, 2)}\n`,
);
console.log(`Wrote ${file}`);
