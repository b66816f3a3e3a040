/**
 * `npm run bench:collectives`: bus bandwidth of every op, float32 and bfloat16 (and float32 with
 * bfloat16 on the wire), 256 KiB to 64 MiB, world sizes 2 and 3, on the shm and tcp backends;
 * plus single-core memcpy, one and n threads copying 16 MiB at once (the shm peer, with the
 * busbw each shm op would reach at that copy rate), bfloat16 conversion throughput and a bidirectional raw-socket
 * transfer measured in the same run; then the tcp float32 all-reduce against PyTorch gloo
 * (bench/gloo-all-reduce.py, when /usr/bin/python3 imports torch), interleaved tcp, tcp with
 * FSDP_TCP_BLAS=0 (when OpenBLAS adds the sums), gloo, tcp, ...; then secure transport against plain (`fsdp-run --secure`, float32 all-reduce and
 * all-gather, 16 MiB, W=2, interleaved plain, secure, plain, ... for 3 rounds); then every target
 * with met / NOT met and the load average.
 * Then the per-op fixed cost: a barrier and a one-element all-reduce, W=2, shm and tcp, against
 * their raw peers (a round trip between two threads through Atomics.wait/notify and through a
 * MessagePort), interleaved raw, shm, tcp for 2 rounds.
 * In the sweep, the variants and placements of one op and size are measured in alternating blocks
 * of two ops ([Note: interleaved sweep] in sweep.ts), so their ratios compare neighbours in time.
 * Options: --quick (256 KiB, 4 MiB, 16 MiB only in the sweep; the gloo comparison keeps 1, 16 and
 * 64 MiB), --backends shm,tcp, --worlds 2,3, --no-gloo, --no-secure, --secure-only (just the secure
 * comparison and its target), --small-ops-only (just the per-op fixed cost), --gloo-only (just the
 * tcp vs gloo comparison at 1, 16 and 64 MiB, W=2 and 3, three interleaved rounds, and its targets),
 * --no-mpi, --mpi-only (just the mpi comparison: mpi backend vs Open MPI through mpi4py, interleaved,
 * all-reduce, all-gather and reduce-scatter at 1, 16 and 64 MiB, W=2 and 3; the tcp all-reduce at
 * 16 MiB; FSDP's communication-bound step on mpi and tcp; see mpi-comparison.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { loadNativeFloatAdd } from '@fsdp-ts/kernels';
import { startRun } from '../../../bench/internal/run-context';
import { spawnThreadRanks } from '../src/index.js';
import { blasSetting } from '../src/internal/tcp/native-blas.js';
import { resolveNativeSocketsModule } from '../src/internal/tcp/native-sockets.js';
import { runWithLauncher } from '../test/helpers/run-with-launcher.js';
import { glooUnavailable } from './gloo.js';
import { compareWithGloo, type GlooComparison, printGlooComparison } from './gloo-comparison.js';
import { measureCopyPeer, shmCeiling } from './memory-peer.js';
import {
  compareWithMpi,
  type MpiComparison,
  mpiTargets,
  mpiUnavailable,
  printMpiComparison,
} from './mpi-comparison.js';
import type { RawSocketResult } from './raw-socket.js';
import {
  combineShmPeers,
  copyPeerRate,
  floorBusbw,
  measureShmPeers,
  printShmPeers,
  type ShmPeers,
} from './shm-peers.js';
import { type LatencyFigure, measureRawPeers, type SmallOpRow } from './small-op.js';
import type { SweepConfig, SweepRow } from './sweep.js';
import { bfloat16WirePhases, conversion, memcpy, stats } from './thread-probes.js';

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(name);
const listOption = (name: string, fallback: string) => (argv[argv.indexOf(name) + 1] ?? fallback).split(',');
const quick = flag('--quick');
const smallOpsOnly = flag('--small-ops-only');
const secureOnly = flag('--secure-only');
const glooOnly = flag('--gloo-only');
const mpiOnly = flag('--mpi-only');
const backends =
  secureOnly || smallOpsOnly || glooOnly || mpiOnly
    ? []
    : argv.includes('--backends')
      ? listOption('--backends', 'shm,tcp')
      : ['shm', 'tcp'];
const worlds = (argv.includes('--worlds') ? listOption('--worlds', '2,3') : ['2', '3']).map(Number);
const MiB = 1 << 20;
const config: SweepConfig = {
  ops: ['allReduce', 'allGather', 'reduceScatter', 'broadcast'],
  variants: ['float32', 'bfloat16', 'f32/bf16-wire'],
  sizes: quick ? [MiB / 4, 4 * MiB, 16 * MiB] : [MiB / 4, MiB, 4 * MiB, 16 * MiB, 64 * MiB],
  iterations: 10,
  warmup: 2,
};

interface BackendRows {
  backend: string;
  worldSize: number;
  rows: SweepRow[];
  rawSocket?: RawSocketResult | undefined;
  /** tcp: rank 0's connections by transport ([Note: local peer sockets]). */
  links?: { unix: number; tcp: number } | undefined;
  /** shm: the hardware's peers and the ops' data floors, before and after the sweep. */
  peers?: ShmPeers | undefined;
}

async function shm(worldSize: number): Promise<BackendRows> {
  const before = await measureShmPeers(worldSize);
  const results = (await spawnThreadRanks(
    worldSize,
    new URL('./shm-rank.ts', import.meta.url),
    'shmBenchRank',
    {
      args: {
        ...config,
        variants: config.variants.filter((variant) => variant !== 'f32/bf16-wire'),
        placements: ['arena', 'plain'],
        forms: ['out-of-place', 'in-place'],
      },
      timeoutMs: 1_800_000,
    },
  )) as SweepRow[][];
  return {
    backend: 'shm',
    worldSize,
    rows: results[0]!,
    peers: combineShmPeers(before, await measureShmPeers(worldSize)),
  };
}

async function tcp(
  worldSize: number,
  sweep: SweepConfig = config,
  secure = false,
  env: Record<string, string> = {},
): Promise<BackendRows> {
  const run = await runWithLauncher(worldSize, new URL('./tcp-rank.ts', import.meta.url), [], {
    timeoutMs: 1_800_000,
    env: { FSDP_BENCH_CONFIG: JSON.stringify(sweep), ...env },
    launcherArgs: secure ? ['--secure'] : [],
  });
  const result = run.results.get(0) as
    | { rows: SweepRow[]; rawSocket?: RawSocketResult; links?: { unix: number; tcp: number } }
    | undefined;
  if (run.code !== 0 || result === undefined)
    throw new Error(`tcp benchmark with ${worldSize} ranks failed:\n${run.output}`);
  if (result.links !== undefined) tcpTransports.add(transportLabel(result.links));
  return { backend: 'tcp', worldSize, rows: result.rows, rawSocket: result.rawSocket, links: result.links };
}

/** How rank 0's connections ran: 'unix', 'tcp', or both with counts. */
function transportLabel(links: { unix: number; tcp: number }): string {
  if (links.tcp === 0) return 'Unix-domain sockets';
  if (links.unix === 0) return 'TCP loopback';
  return `${links.unix} Unix-domain and ${links.tcp} TCP connections`;
}
/** Every transport the tcp runs of this benchmark used (FSDP_TCP_LOCAL; [Note: local peer sockets]). */
const tcpTransports = new Set<string>();
const describeTransports = () => (tcpTransports.size === 0 ? 'unknown' : [...tcpTransports].join(' / '));

/** A row's variant, placement and form, as the tables print them. */
function caseLabel(row: SweepRow): string {
  return `${row.variant}${row.placement === 'arena' ? '/arena' : ''}${row.form === 'in-place' ? '/in-place' : ''}`;
}

function formatBytes(bytes: number): string {
  return bytes >= MiB ? `${(bytes / MiB).toFixed(0)} MiB` : `${(bytes / 1024).toFixed(0)} KiB`;
}

const uptime = () =>
  `load average ${loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`;
const benchmarkRun = startRun();
const startedAt = new Date().toISOString();
const loadBefore = loadavg()[0]!;
console.log(`Started ${startedAt}, ${uptime()} on ${cpus().length} cores (shared with other agents).`);
const nativePath = resolveNativeSocketsModule() !== undefined;
const blasLoad =
  nativePath && blasSetting(0) !== 'off' ? loadNativeFloatAdd(resolveNativeSocketsModule()) : undefined;
/** The native path adds float32 sums with OpenBLAS ([Note: blas reduce steps]); compared with FSDP_TCP_BLAS=0. */
const blasPath = blasLoad?.add !== undefined;
console.log(
  `tcp data path: ${nativePath ? 'native (libc send/recv/poll through koffi)' : 'node:net (koffi not installed, not Linux, or FSDP_TCP_NATIVE=0)'}; float32 sums: ${blasPath ? `OpenBLAS saxpy in place (${blasLoad!.add!.library}), compared with FSDP_TCP_BLAS=0 (SIMD kernels)` : `SIMD kernels (${blasLoad === undefined ? 'native path or FSDP_TCP_BLAS off' : blasLoad.reason})`}`,
);
const copy = memcpy();
console.log(
  `single-core memcpy (64 MiB Uint8Array.set): median ${copy.median.toFixed(2)} GB/s [${copy.worst.toFixed(2)} .. ${copy.best.toFixed(2)}]`,
);
const alone = backends.includes('shm') ? await measureCopyPeer(1) : undefined;
if (alone !== undefined)
  console.log(
    `one thread copying 16 MiB (Float32Array.set, shared memory): median ${alone.median.toFixed(2)} GB/s [${alone.worst.toFixed(2)} .. ${alone.best.toFixed(2)}]`,
  );
const converted = conversion();
console.log(
  `bfloat16 conversion, 4 Mi elements: encode median ${converted.encode.median.toFixed(2)} G elements/s [${converted.encode.worst.toFixed(2)} .. ${converted.encode.best.toFixed(2)}], decode ${converted.decode.median.toFixed(2)} [${converted.decode.worst.toFixed(2)} .. ${converted.decode.best.toFixed(2)}]`,
);
const measured: BackendRows[] = [];
for (const backend of backends) {
  for (const worldSize of worlds) {
    const result = backend === 'shm' ? await shm(worldSize) : await tcp(worldSize);
    measured.push(result);
    if (result.rawSocket !== undefined) {
      const raw = result.rawSocket.perDirection;
      console.log(
        `raw node:net over ${result.rawSocket.transport === 'unix' ? 'a Unix-domain socket' : 'TCP loopback'} (the transport of the tcp rows: ${describeTransports()}), 16 MiB each way at once, per direction: median ${raw.median.toFixed(2)} GB/s [${raw.worst.toFixed(2)} .. ${raw.best.toFixed(2)}]`,
      );
    }
    const copyRate = result.peers === undefined ? undefined : copyPeerRate(result.peers);
    if (result.peers !== undefined) printShmPeers(result.peers, worldSize, uptime);
    console.log(`\n${backend} world size ${worldSize}: busbw GB/s (median [min .. max]), ms per op (median)`);
    console.log(
      `${'op'.padEnd(14)}${'variant'.padEnd(26)}${'size'.padStart(8)}${'ms'.padStart(10)}  ${'busbw'.padEnd(24)}${copyRate === undefined ? 'worker CPU / op time' : 'ceiling  busbw/ceiling   floor  busbw/floor'}`,
    );
    for (const row of result.rows) {
      const busbw = `${row.busbw.toFixed(2)} [${row.busbwWorst.toFixed(2)} .. ${row.busbwBest.toFixed(2)}]`;
      const share = row.workerCpuShare === undefined ? '' : `${(row.workerCpuShare * 100).toFixed(0)}%`;
      const ceiling = copyRate === undefined ? undefined : shmCeiling(row.op, worldSize, copyRate, row.form);
      const floor = result.peers === undefined ? undefined : floorBusbw(result.peers, row, worldSize);
      const floorText =
        floor === undefined ? '' : `${floor.toFixed(2).padStart(7)}  ${(row.busbw / floor).toFixed(2)}`;
      const peer =
        ceiling === undefined
          ? share
          : `${ceiling.toFixed(2).padStart(7)}  ${(row.busbw / ceiling).toFixed(2).padEnd(15)}${floorText}`;
      console.log(
        `${row.op.padEnd(14)}${caseLabel(row).padEnd(26)}${formatBytes(row.bytes).padStart(8)}${row.medianMs.toFixed(2).padStart(10)}  ${busbw.padEnd(24)}${peer}`,
      );
    }
  }
}

// tcp float32 all-reduce against PyTorch gloo, interleaved (gloo-comparison.ts).
const glooSizes = quick || glooOnly ? [MiB, 16 * MiB, 64 * MiB] : [MiB, 4 * MiB, 16 * MiB, 64 * MiB];
const glooRounds = glooOnly ? 3 : 2;
/**
 * Timed ops per size per round, after warm-ups, on both sides ([Note: warm-up by volume]). With
 * --gloo-only: at least 2 GiB of untimed ops per size (2048 at 1 MiB, 32 at 64 MiB; at least 5),
 * then at least 256 MiB of timed ones (256 at 1 MiB; at least 15): each tcp round is a fresh Node
 * process whose first ~2000 ops at 1 MiB still run while V8 compiles the data path's loops (gloo
 * is compiled C++). --quick: 256 MiB (at least 2) untimed, then 64 MiB (at least 5) timed.
 */
const glooIterations = glooOnly
  ? { iterations: 15, warmup: 5, warmupBytes: 2 * 1024 * MiB, timedBytes: 256 * MiB }
  : { iterations: 5, warmup: 2, warmupBytes: 256 * MiB, timedBytes: 64 * MiB };
const glooWhyNot =
  flag('--no-gloo') || secureOnly || smallOpsOnly || mpiOnly ? 'skipped (--no-gloo)' : glooUnavailable();
let comparisons: GlooComparison[] = [];
if (glooWhyNot === undefined && (backends.includes('tcp') || glooOnly)) {
  comparisons = await compareWithGloo(
    {
      worlds,
      sizes: glooSizes,
      rounds: glooRounds,
      iterations: glooIterations,
      blasPath,
      nodeNet: nativePath && !glooOnly,
    },
    (worldSize, sweep, env) => tcp(worldSize, sweep, false, env),
  );
  console.log(
    `\ntcp vs gloo float32 all-reduce (tcp between ranks over ${describeTransports()}, FSDP_TCP_LOCAL=${process.env.FSDP_TCP_LOCAL ?? 'unset'}; gloo over TCP loopback; ms per op, median of max(${glooIterations.iterations}, ${glooIterations.timedBytes / MiB} MiB / size) after max(${glooIterations.warmup}, ${glooIterations.warmupBytes / MiB} MiB / size) warm-ups, ${glooRounds} interleaved rounds each: tcp${blasPath ? ' (OpenBLAS sums), tcp with FSDP_TCP_BLAS=0 (SIMD sums)' : ''}, ${glooOnly ? '' : 'tcp on node:net, '}gloo; CPU: rank 0's process, every thread, ms per op, median of the rounds; ${uptime()})`,
  );
  printGlooComparison(comparisons, formatBytes);
} else console.log(`\ntcp vs gloo: not run: ${glooWhyNot ?? 'tcp not benchmarked'}`);

// The mpi backend against Open MPI called directly (mpi4py), interleaved (mpi-comparison.ts).
const mpiWhyNot =
  flag('--no-mpi') || secureOnly || smallOpsOnly || glooOnly ? 'skipped (--no-mpi)' : mpiUnavailable();
let mpiComparison: MpiComparison | undefined;
if (mpiWhyNot === undefined) {
  const mpiRounds = 2;
  const mpiIterations = { iterations: 10, warmup: 3, warmupBytes: 256 * MiB, timedBytes: 128 * MiB };
  mpiComparison = await compareWithMpi(
    {
      worlds,
      sizes: [MiB, 16 * MiB, 64 * MiB],
      rounds: mpiRounds,
      iterations: mpiIterations,
      fsdpSteps: quick ? 20 : 40,
    },
    (worldSize, sweep, env) => tcp(worldSize, sweep, false, env),
  );
  console.log(
    `\nmpi backend vs Open MPI through mpi4py, float32, both under mpirun ${mpiComparison.mpirunFlags.join(' ')} (ms per op, median of max(${mpiIterations.iterations}, ${mpiIterations.timedBytes / MiB} MiB / size) after max(${mpiIterations.warmup}, ${mpiIterations.warmupBytes / MiB} MiB / size) warm-ups, each op after a barrier; ${mpiRounds} interleaved rounds: mpi, mpi4py, tcp 16 MiB all-reduce; ${uptime()})`,
  );
  printMpiComparison(mpiComparison, formatBytes);
} else console.log(`\nmpi vs mpi4py: not run: ${mpiWhyNot}`);

// Secure transport against plain (issue 17): W=2, 16 MiB float32, interleaved in this run.
const secureOps = ['allReduce', 'allGather'] as const;
const secureRates = new Map<string, { plain: number[]; secure: number[] }>(
  secureOps.map((op) => [op, { plain: [], secure: [] }]),
);
const secureWhyNot =
  flag('--no-secure') || smallOpsOnly || glooOnly || mpiOnly ? 'skipped (--no-secure)' : undefined;
if (secureWhyNot === undefined) {
  const sweep: SweepConfig = {
    ops: [...secureOps],
    variants: ['float32'],
    sizes: [16 * MiB],
    iterations: 5,
    warmup: 2,
  };
  for (let round = 0; round < 3; round++) {
    for (const secure of [false, true]) {
      const result = await tcp(2, sweep, secure);
      for (const row of result.rows) secureRates.get(row.op)?.[secure ? 'secure' : 'plain'].push(row.busbw);
    }
  }
  console.log(
    `\nsecure (fsdp-run --secure, TLS 1.2 PSK-AES256-GCM) vs plain tcp, W=2, 16 MiB float32, busbw GB/s per round, plain and secure interleaved (${uptime()})`,
  );
  for (const [op, rates] of secureRates) {
    const ratios = rates.secure.map((rate, index) => rate / rates.plain[index]!);
    console.log(
      `${op.padEnd(14)}plain ${rates.plain.map((rate) => rate.toFixed(2)).join(', ')}  secure ${rates.secure.map((rate) => rate.toFixed(2)).join(', ')}  secure/plain ${ratios.map((ratio) => ratio.toFixed(2)).join(', ')}`,
    );
  }
} else console.log(`\nsecure vs plain: not run: ${secureWhyNot}`);

// Per-op fixed cost (issue 15): the smallest ops against two threads' raw round trips, interleaved.
const SMALL_OPS_PER_BATCH = 200;
const smallOpRounds: {
  atomics: LatencyFigure;
  messagePort: LatencyFigure;
  shm: SmallOpRow[];
  tcp: SmallOpRow[];
}[] = [];
if (!secureOnly && !glooOnly && !mpiOnly) {
  for (let round = 0; round < 2; round++) {
    const rawPeers = await measureRawPeers(SMALL_OPS_PER_BATCH);
    const shmRows = (await spawnThreadRanks(2, new URL('./shm-rank.ts', import.meta.url), 'shmSmallOpRank', {
      args: { opsPerBatch: SMALL_OPS_PER_BATCH },
      timeoutMs: 600_000,
    })) as SmallOpRow[][];
    const run = await runWithLauncher(2, new URL('./tcp-rank.ts', import.meta.url), [], {
      timeoutMs: 600_000,
      env: { FSDP_BENCH_SMALL_OPS: String(SMALL_OPS_PER_BATCH) },
    });
    const tcpResult = run.results.get(0) as { rows: SmallOpRow[] } | undefined;
    if (run.code !== 0 || tcpResult === undefined)
      throw new Error(`tcp small-op benchmark failed:\n${run.output}`);
    smallOpRounds.push({ ...rawPeers, shm: shmRows[0]!, tcp: tcpResult.rows });
  }
  const format = (latency: LatencyFigure) =>
    `${latency.median.toFixed(0)} [${latency.best.toFixed(0)} .. ${latency.worst.toFixed(0)}]`;
  console.log(
    `\nper-op fixed cost, W=2: microseconds per op or round trip, median [min .. max] of 9 batches (CPU: the process's, all threads) of ${SMALL_OPS_PER_BATCH}, raw / shm / tcp interleaved, one line per round (${uptime()})`,
  );
  for (const [index, round] of smallOpRounds.entries()) {
    console.log(`round ${index + 1}`);
    console.log(`  ${'raw Atomics.wait/notify round trip, 2 threads'.padEnd(46)}${format(round.atomics)}`);
    console.log(`  ${'raw MessagePort round trip, 2 threads'.padEnd(46)}${format(round.messagePort)}`);
    for (const backend of ['shm', 'tcp'] as const)
      for (const row of round[backend])
        console.log(
          `  ${`${backend} ${row.name}`.padEnd(46)}${format(row.latency).padEnd(20)}${`${(row.latency.median / round.atomics.median).toFixed(1)}x Atomics round trip`.padEnd(26)}CPU ${row.cpuPerOp.toFixed(0)} us/op (${backend === 'shm' ? 'both ranks' : 'rank 0'})`,
        );
  }
}

// Targets (issue 15 and the collectives issue): world size 2, 16 MiB unless stated.
const pick = (backend: string, op: string, variant: string, placement = 'plain', form = 'out-of-place') =>
  measured
    .find((result) => result.backend === backend && result.worldSize === 2)
    ?.rows.find(
      (row) =>
        row.op === op &&
        row.variant === variant &&
        row.placement === placement &&
        row.form === form &&
        row.bytes === 16 * MiB,
    );
const raw = measured.find((result) => result.rawSocket !== undefined)?.rawSocket?.perDirection.median;
interface Target {
  target: string;
  figure: string;
  met: boolean | undefined;
}
const targets: Target[] = [];
for (const [name, rate] of [
  ['encode', converted.encode.median],
  ['decode', converted.decode.median],
] as const)
  targets.push({
    target: `bfloat16 ${name} >= 1 G elements/s`,
    figure: `${rate.toFixed(2)} G/s`,
    met: rate >= 1,
  });
// The shm target is judged on opt-in arena buffers (allocateShared(..., { arena: true }), the
// in-place path); the plain SharedArrayBuffer figure of the same run, the copy path FSDP and
// layers use over shm today, is printed next to it.
const shmResult = measured.find((result) => result.backend === 'shm' && result.worldSize === 2);
const shmCopyRate = shmResult?.peers === undefined ? undefined : copyPeerRate(shmResult.peers);
const shmForms = [
  ['allReduce', 'out-of-place'],
  ['allGather', 'out-of-place'],
  ['allGather', 'in-place'],
  ['reduceScatter', 'out-of-place'],
  ['reduceScatter', 'in-place'],
] as const;
for (const [op, form] of shmForms) {
  const shmRow = pick('shm', op, 'float32', 'arena', form) ?? pick('shm', op, 'float32', 'plain', form);
  const plainRow = pick('shm', op, 'float32', 'plain', form);
  const ceiling = shmCopyRate === undefined ? undefined : shmCeiling(op, 2, shmCopyRate, form);
  const floor =
    shmRow === undefined || shmResult?.peers === undefined
      ? undefined
      : floorBusbw(shmResult.peers, shmRow, 2);
  const plainFloor =
    plainRow === undefined || shmResult?.peers === undefined
      ? undefined
      : floorBusbw(shmResult.peers, plainRow, 2);
  const plain =
    plainRow === undefined || plainRow === shmRow
      ? ''
      : ` (plain SharedArrayBuffer: ${plainRow.busbw.toFixed(2)}${plainFloor === undefined ? '' : `, ${(plainRow.busbw / plainFloor).toFixed(2)} of its data floor ${plainFloor.toFixed(2)}`})`;
  const against = [
    floor === undefined
      ? ''
      : `${(shmRow!.busbw / floor).toFixed(2)} of its data floor ${floor.toFixed(2)} GB/s (the same data work with no messages, wake-ups or finish)`,
    ceiling === undefined
      ? ''
      : `${(shmRow!.busbw / ceiling).toFixed(2)} of the ${ceiling.toFixed(2)} GB/s ceiling at the copy rate ${shmCopyRate!.toFixed(2)} GB/s per thread`,
  ].filter((text) => text !== '');
  targets.push({
    target: `shm ${op}${form === 'in-place' ? ' in place' : ''} float32 busbw >= 6 GB/s (opt-in arena buffers)`,
    figure:
      shmRow === undefined
        ? 'not measured'
        : `${shmRow.busbw.toFixed(2)} GB/s${plain}${against.length === 0 ? '' : `; ${against.join('; ')}`}`,
    met: shmRow === undefined ? undefined : shmRow.busbw >= 6,
  });
}
// Where a 16 MiB W=2 arena all-reduce's time goes: the data floor (the same reduction on both
// threads at once, no messages or wake-ups) against the op.
const floorResult = measured.find((result) => result.backend === 'shm' && result.worldSize === 2);
const arenaAllReduce = pick('shm', 'allReduce', 'float32', 'arena');
if (floorResult?.peers !== undefined && arenaAllReduce !== undefined) {
  const { before, after } = floorResult.peers.inPlaceFloor;
  const floorMs = (before.medianMs + after.medianMs) / 2;
  targets.push({
    target: 'shm allReduce 16 MiB W=2 arena: op time against its data floor (reported, no target)',
    figure: `${arenaAllReduce.medianMs.toFixed(2)} ms per op, of which the in-place reduction on both threads takes ${floorMs.toFixed(2)} ms; the other ${(arenaAllReduce.medianMs - floorMs).toFixed(2)} ms are the op's message exchange, wake-ups and finish phase`,
    met: undefined,
  });
}
const wirePhases = backends.includes('tcp') ? bfloat16WirePhases() : undefined;
for (const op of ['allGather', 'reduceScatter'] as const) {
  const tcpRow = pick('tcp', op, 'float32');
  const wireRow = pick('tcp', op, 'f32/bf16-wire');
  const ratio = tcpRow !== undefined && wireRow !== undefined ? wireRow.busbw / tcpRow.busbw : undefined;
  // What bfloat16 adds per rank, against what the halved bytes can save at most (half the
  // float32 op, all of whose time counted as moving bytes): the loopback bound on the ratio.
  const phases = wirePhases?.[op];
  const profile =
    phases === undefined || tcpRow === undefined || wireRow === undefined
      ? ''
      : `; per rank: ${phases.text}, ${phases.extraMs.toFixed(2)} ms more than float32's own work; float32 op ${tcpRow.medianMs.toFixed(2)} ms, bf16-wire op ${wireRow.medianMs.toFixed(2)} ms; halving the bytes saves at most ${(tcpRow.medianMs / 2).toFixed(2)} ms, so on this loopback bf16 can reach at most ${(tcpRow.medianMs / (tcpRow.medianMs / 2 + phases.extraMs)).toFixed(2)}x`;
  targets.push({
    target: `tcp ${op} bf16 wire >= 1.3x float32`,
    figure: ratio === undefined ? 'not measured' : `${ratio.toFixed(2)}x${profile}`,
    met: ratio === undefined ? undefined : ratio >= 1.3,
  });
}
for (const op of ['allReduce', 'allGather', 'reduceScatter']) {
  const tcpRow = pick('tcp', op, 'float32');
  const ratio = tcpRow !== undefined && raw !== undefined ? tcpRow.busbw / raw : undefined;
  targets.push({
    target: `tcp ${op} float32 >= 0.8x raw socket`,
    figure: ratio === undefined ? 'not measured' : `${ratio.toFixed(2)}x`,
    met: ratio === undefined ? undefined : ratio >= 0.8,
  });
}
for (const worldSize of worlds) {
  for (const bytes of glooSizes) {
    const row = comparisons.find((item) => item.worldSize === worldSize && item.bytes === bytes);
    const ratio = row === undefined ? undefined : stats(row.glooMs).median / stats(row.tcpMs).median;
    targets.push({
      target: `tcp float32 allReduce >= gloo, W=${worldSize} ${formatBytes(bytes)}`,
      figure:
        ratio === undefined
          ? `not measured (${glooWhyNot ?? 'no tcp'})`
          : `gloo/tcp time ${ratio.toFixed(2)}`,
      met: ratio === undefined ? undefined : ratio >= 1,
    });
  }
}
for (const op of secureOps) {
  const rates = secureRates.get(op)!;
  const ratio = rates.plain.length === 0 ? undefined : stats(rates.secure).median / stats(rates.plain).median;
  targets.push({
    target: `tcp ${op} secure >= 0.6x plain (W=2, 16 MiB float32)`,
    figure:
      ratio === undefined
        ? `not measured (${secureWhyNot})`
        : `${ratio.toFixed(2)}x (median busbw ${stats(rates.secure).median.toFixed(2)} vs ${stats(rates.plain).median.toFixed(2)} GB/s)`,
    met: ratio === undefined ? undefined : ratio >= 0.6,
  });
}
const shares = measured
  .filter((result) => result.backend === 'tcp' && result.worldSize === 2)
  .flatMap((result) => result.rows.filter((row) => row.bytes === 16 * MiB && row.variant === 'float32'));
targets.push({
  target: 'communication worker CPU share (tcp, W=2, 16 MiB float32; reported, no target)',
  figure:
    shares.length === 0
      ? 'not measured'
      : shares.map((row) => `${row.op} ${((row.workerCpuShare ?? Number.NaN) * 100).toFixed(0)}%`).join(', '),
  met: undefined,
});
const smallOpMedian = (backend: 'shm' | 'tcp', name: string) =>
  smallOpRounds.length === 0
    ? undefined
    : stats(
        smallOpRounds.map(
          (round) => round[backend].find((row) => row.name === name)!.latency.median / round.atomics.median,
        ),
      ).median;
for (const backend of ['shm', 'tcp'] as const) {
  const ratio = smallOpMedian(backend, 'allReduce 1 float32 (wait)');
  targets.push({
    target: `${backend} one-element allReduce latency, W=2, in Atomics round trips (reported, no target)`,
    figure: ratio === undefined ? 'not measured' : `${ratio.toFixed(1)}x`,
    met: undefined,
  });
}
targets.push(...mpiTargets(mpiComparison, mpiWhyNot ?? '', formatBytes));
console.log(`\nTargets (${uptime()}):`);
const shown = secureOnly
  ? targets.filter((each) => each.target.includes('secure'))
  : glooOnly
    ? targets.filter((each) => each.target.includes('gloo'))
    : smallOpsOnly
      ? targets.filter((each) => each.target.includes('latency'))
      : mpiOnly
        ? targets.filter((each) => /mpi|default backend/.test(each.target))
        : targets;
for (const target of shown) {
  const verdict = target.met === undefined ? 'n/a    ' : target.met ? 'met    ' : 'NOT met';
  console.log(`  ${verdict} ${target.target}: ${target.figure}`);
}
const loadAfter = loadavg()[0]!;
console.log(
  `\nLoad average ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after, on ${cpus().length} cores shared with other agents: figures are noisy.`,
);
const resultsDirectory = fileURLToPath(new URL('../../../bench-results/', import.meta.url));
mkdirSync(resultsDirectory, { recursive: true });
const file = `${resultsDirectory}collectives${secureOnly ? '-secure' : smallOpsOnly ? '-small-ops' : glooOnly ? '-gloo' : mpiOnly ? '-mpi' : quick ? '-quick' : ''}.json`;
writeFileSync(
  file,
  `${JSON.stringify({ startedAt, context: benchmarkRun.finish(), machine: { cores: cpus().length, loadBefore, loadAfter, note: 'shared with other agents; noisy' }, config, memcpy: copy, copyAlone: alone, conversion: converted, measured, comparisons, mpi: mpiComparison, secure: Object.fromEntries(secureRates), smallOps: smallOpRounds, targets }, null, 2)}\n`,
);
console.log(`Wrote ${file}`);
