/**
 * Each benchmark's results, as bench/RESULTS.md shows them: which file it writes, the command that
 * produces it, and how its JSON becomes tables whose rows carry their peer from the same run. The
 * shapes are the ones the benchmarks write (see each bench's writeFileSync); a new benchmark is one
 * entry here.
 */
import { peerOf } from '../cluster/cluster-model';
import type { Benchmark, HeadlineRow, Rendered, Row, Target } from './render-results';

interface Spread {
  min: number;
  median: number;
  max: number;
}

const spread = (value: Spread, digits = 2, scale = 1) =>
  `${(value.median / scale).toFixed(digits)} (${(value.min / scale).toFixed(digits)}–${(value.max / scale).toFixed(digits)})`;
const ratio = (value: number, peer: number) => `${(value / peer).toFixed(2)}×`;
/** The median as the benchmarks compute it (the mean of the middle two of an even count). */
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};
/** A ratio where more is better, with the word a reader wants: `1.76× (faster)`. */
const speedup = (value: number, peer: number) => {
  const factor = value / peer;
  return `${factor.toFixed(2)}× (${factor >= 1.03 ? 'faster' : factor > 0.97 ? 'as fast' : 'slower'})`;
};
const percent = (value: number) => `${(100 * value).toFixed(0)}%`;

// ---------------------------------------------------------------- @fsdp-ts/optim (adamw-step.ts)
interface OptimResults {
  numel: number;
  repeats: number;
  rows: { name: string; bytesPerElement: number; milliseconds: Spread; bytesPerSecond: Spread }[];
  adamwOverMemcpyBandwidth: number;
}

function renderOptim(results: OptimResults): Rendered {
  const memcpy = results.rows.find((row) => row.name.startsWith('memcpy'));
  const simdLamb = results.rows.find((row) => row.name.startsWith('LAMB step'));
  const rows: Row[] = results.rows
    .filter((row) => row !== memcpy)
    .map((row) => {
      // The scalar LAMB kernels' peer is the SIMD LAMB step; every optimizer step's is memcpy.
      const peer = row.name.includes('scalar') ? simdLamb : memcpy;
      return {
        cells: [
          row.name,
          `${row.bytesPerElement}`,
          spread(row.milliseconds, 1),
          spread(row.bytesPerSecond, 2, 1e9),
        ],
        peer:
          peer === undefined
            ? undefined
            : `${peer.name}: ${spread(peer.bytesPerSecond, 2, 1e9)} GB/s; ${percent(row.bytesPerSecond.median / peer.bytesPerSecond.median)}`,
      };
    });
  return {
    notes: [
      `${results.numel.toLocaleString('en')} float32 elements, ${results.repeats} interleaved samples each; rates from this process's CPU time per operation.`,
    ],
    tables: [
      {
        title: 'One optimizer step against memcpy of the same element count',
        columns: ['measure', 'bytes touched per element', 'CPU ms', 'GB/s touched'],
        peerColumn: 'peer (GB/s; row / peer)',
        rows,
      },
    ],
    targets: [
      {
        name: 'AdamW bandwidth >= 50% of memcpy bandwidth (medians)',
        met: results.adamwOverMemcpyBandwidth >= 0.5,
        figure: percent(results.adamwOverMemcpyBandwidth),
      },
    ],
  };
}

// ---------------------------------------------------------------- @fsdp-ts/tensor (tensor-bench.ts)
interface TensorResults {
  rows: { backend: string; measure: string; unit: string; value: Spread }[];
}

function renderTensor(results: TensorResults): Rendered {
  const find = (backend: string, prefix: string) =>
    results.rows.find((row) => row.backend === backend && row.measure.startsWith(prefix));
  const copy = find('js', 'plain copy');
  const sgemm = find('blas', 'direct cblas_sgemm');
  const torch = find('torch', 'torch.mm');
  /** A row's peer in the same run: bytes against the plain copy, FLOPs against BLAS on the same shape. */
  const peerOf = (row: TensorResults['rows'][number]) => {
    if (row.unit === 'GB/s') return copy;
    if (row.measure.startsWith('matMul fwd+bwd')) return find(row.backend, 'three plain fwd');
    if (row.measure.startsWith('direct cblas_sgemm')) return torch;
    if (row.measure.startsWith('three plain')) return undefined; // the peer row of fwd+bwd
    // Without a BLAS library, a backend's matMul stands beside the other backend's.
    return (
      sgemm ?? results.rows.find((other) => other.backend !== row.backend && other.measure === row.measure)
    );
  };
  const measured = results.rows.filter(
    (row) =>
      row.unit !== 'ratio' &&
      row !== copy &&
      row !== torch &&
      (row !== sgemm || torch !== undefined) && // sgemm is a row when PyTorch ran beside it, else a peer
      !row.measure.startsWith('three plain'),
  );
  const rows: Row[] = measured.map((row) => {
    const peer = peerOf(row);
    return {
      cells: [row.backend, row.measure, `${spread(row.value)} ${row.unit}`],
      peer:
        peer === undefined
          ? undefined
          : `${peer.backend} ${peer.measure}: ${spread(peer.value)} ${peer.unit}; ${ratio(row.value.median, peer.value.median)}`,
    };
  });
  const targets: Target[] = results.rows
    .filter((row) => row.unit === 'ratio')
    .map((row) => {
      const threshold = row.measure.startsWith('BLAS kernel') ? 0.85 : 0.5;
      return {
        name: `${row.backend} ${row.measure} >= ${threshold}`,
        met: row.value.median >= threshold,
        figure: row.value.median.toFixed(2),
      };
    });
  return {
    tables: [
      {
        title: 'matMul, conversions and the tfjs bridge (GB/s against a plain copy; GFLOP/s against BLAS)',
        columns: ['backend', 'measure', 'median (min–max)'],
        peerColumn: 'peer in the same run; row / peer',
        rows,
      },
    ],
    targets,
  };
}

// ---------------------------------------------------------------- @fsdp-ts/flat-param (flat-param.bench.ts)
interface FlatParamResults {
  switching: { case: string; parameters: number; unshard: Spread; reshard: Spread }[];
  flatten: {
    bytes: number;
    flattenGBps: Spread;
    memcpyFreshGBps: Spread;
    memcpyWarmGBps: Spread;
    ratioToFreshMemcpy: number;
    ratioToWarmMemcpy: number;
  };
  unshardMemory: { bytes: number; reallocatedMs: Spread; keptMs: Spread };
}

const switchingTargetMs = 0.5;

function renderFlatParam(results: FlatParamResults): Rendered {
  const { flatten, unshardMemory } = results;
  const megabytes = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
  return {
    tables: [
      {
        title: `Flattening ${megabytes(flatten.bytes)} (400 parameters) against memcpy of the same bytes`,
        columns: ['operation', 'GB/s'],
        peerColumn: 'memcpy GB/s, fresh / warm buffer; row / peer',
        rows: [
          {
            cells: ['FlatParamHandle.create', spread(flatten.flattenGBps)],
            peer: `${spread(flatten.memcpyFreshGBps)} / ${spread(flatten.memcpyWarmGBps)}; ${percent(flatten.ratioToFreshMemcpy)} / ${percent(flatten.ratioToWarmMemcpy)}`,
          },
        ],
      },
      {
        title: `Filling the unsharded buffer (${megabytes(unshardMemory.bytes)}): freed and re-allocated each time, against kept allocated`,
        columns: ['case', 'ms'],
        peerColumn: 'kept allocated, ms; row / peer',
        rows: [
          {
            cells: ['freed and re-allocated', spread(unshardMemory.reallocatedMs, 3)],
            peer: `${spread(unshardMemory.keptMs, 3)}; ${ratio(unshardMemory.reallocatedMs.median, unshardMemory.keptMs.median)}`,
          },
        ],
      },
      {
        title:
          'View switching, 400 parameters (200 × Linear 64×64 + bias): useUnshardedViews() against useShardedViews()',
        columns: ['case', 'useUnshardedViews() ms'],
        peerColumn: 'useShardedViews() ms',
        rows: results.switching.map((row) => ({
          cells: [row.case, spread(row.unshard, 4)],
          peer: spread(row.reshard, 4),
        })),
      },
    ],
    targets: [
      ...results.switching.map((row) => ({
        name: `view switching <= ${switchingTargetMs} ms each way, ${row.case} (medians)`,
        met: Math.max(row.unshard.median, row.reshard.median) <= switchingTargetMs,
        figure: `${row.unshard.median.toFixed(4)} / ${row.reshard.median.toFixed(4)} ms`,
      })),
      {
        name: 'flatten bandwidth >= 50% of memcpy into a fresh buffer (medians)',
        met: flatten.ratioToFreshMemcpy >= 0.5,
        figure: percent(flatten.ratioToFreshMemcpy),
      },
    ],
  };
}

// ---------------------------------------------------------------- @fsdp-ts/collectives (collectives.ts)
interface SweepRow {
  op: string;
  variant: string;
  placement: string;
  form: string;
  bytes: number;
  busbw: number;
  busbwBest: number;
  busbwWorst: number;
}

interface CollectivesResults {
  config: { sizes: number[] };
  memcpy: { median: number; best: number; worst: number };
  measured: {
    backend: string;
    worldSize: number;
    rows: SweepRow[];
    rawSocket?: { transport: string; perDirection: { median: number; best: number; worst: number } };
    peers?: { copyPeer: { before: { median: number }; after: { median: number } } };
  }[];
  targets: { target: string; figure: string; met?: boolean | null }[];
  /** tcp against PyTorch's gloo, interleaved (bench/gloo-comparison.ts); absent when gloo did not run. */
  comparisons?: { worldSize: number; bytes: number; tcpMs: number[]; glooMs: number[] }[];
}

function headlineCollectives(results: CollectivesResults): HeadlineRow[] {
  const row = results.comparisons?.find(
    (comparison) => comparison.worldSize === 2 && comparison.bytes === 16 * 2 ** 20,
  );
  if (row === undefined || row.tcpMs.length === 0 || row.glooMs.length === 0) return [];
  return [
    {
      what: 'all-reduce of 16 MiB float32, 2 processes on one host: bus bandwidth vs gloo',
      ratio: speedup(median(row.glooMs), median(row.tcpMs)),
    },
  ];
}

/** tcp's float32 all-reduce against PyTorch's gloo, interleaved in the same run (gloo-comparison.ts). */
function glooTables(results: CollectivesResults): Rendered['tables'] {
  const comparisons = (results.comparisons ?? []).filter(
    (row) => row.tcpMs.length > 0 && row.glooMs.length > 0,
  );
  if (comparisons.length === 0) return [];
  const busbw = (worldSize: number, bytes: number, milliseconds: number) =>
    (((2 * (worldSize - 1)) / worldSize) * (bytes / (milliseconds / 1000))) / 1e9;
  return [
    {
      title: 'tcp all-reduce (float32, processes on one host) against PyTorch gloo, rounds interleaved',
      columns: ['W', 'size', 'tcp busbw GB/s (median of rounds)'],
      peerColumn: 'gloo busbw GB/s; row / peer',
      rows: comparisons.map((row) => {
        const ours = busbw(row.worldSize, row.bytes, median(row.tcpMs));
        const gloo = busbw(row.worldSize, row.bytes, median(row.glooMs));
        return {
          cells: [`${row.worldSize}`, sizeLabel(row.bytes), ours.toFixed(2)],
          peer: `${gloo.toFixed(2)}; ${ratio(ours, gloo)}`,
        };
      }),
    },
  ];
}

const peerSpread = (value: { median: number; best: number; worst: number }) =>
  spread({ median: value.median, min: value.worst, max: value.best });
const sizeLabel = (bytes: number) =>
  bytes >= 2 ** 20 ? `${(bytes / 2 ** 20).toFixed(0)} MiB` : `${(bytes / 1024).toFixed(0)} KiB`;

function renderCollectives(results: CollectivesResults): Rendered {
  // The raw socket is measured once per run (by the W=2 tcp launch): every tcp row's peer.
  const raw = results.measured.find((entry) => entry.rawSocket !== undefined)?.rawSocket;
  const tables = results.measured.map((entry) => {
    const copyRate =
      entry.peers === undefined
        ? undefined
        : (entry.peers.copyPeer.before.median + entry.peers.copyPeer.after.median) / 2;
    const peer =
      entry.backend === 'tcp'
        ? raw === undefined
          ? undefined
          : {
              label: `raw socket (${raw.transport}) ${peerSpread(raw.perDirection)}`,
              rate: raw.perDirection.median,
            }
        : copyRate === undefined
          ? undefined
          : { label: `${entry.worldSize} threads copying ${copyRate.toFixed(2)}`, rate: copyRate };
    return {
      title: `${entry.backend}, world size ${entry.worldSize}: float32 bus bandwidth (plain buffers, out of place)`,
      columns: ['op', 'size', 'busbw GB/s'],
      peerColumn:
        entry.backend === 'tcp'
          ? 'raw socket between 2 processes, GB/s per direction with both busy; row / peer'
          : 'W threads copying 16 MiB at once, GB/s; row / peer',
      rows: entry.rows
        .filter(
          (row) => row.variant === 'float32' && row.placement === 'plain' && row.form === 'out-of-place',
        )
        .map((row) => ({
          cells: [
            row.op,
            sizeLabel(row.bytes),
            spread({ median: row.busbw, min: row.busbwWorst, max: row.busbwBest }),
          ],
          peer: peer === undefined ? undefined : `${peer.label}; ${ratio(row.busbw, peer.rate)}`,
        })),
    };
  });
  return {
    notes: [
      `Sizes ${results.config.sizes.map(sizeLabel).join(', ')}; single-core memcpy ${peerSpread(results.memcpy)} GB/s. The JSON also holds the bfloat16 variants, arena buffers, in-place forms and every peer's before/after figure.`,
    ],
    // The gloo comparison and the mpi rows of a full run (with Open MPI as their peer), when they ran.
    tables: [...tables, ...glooTables(results), ...renderMpi(results as unknown as MpiResults).tables],
    targets: results.targets.map((target) => ({
      name: target.target,
      met: target.met ?? undefined,
      figure: target.figure,
    })),
  };
}

// ------------------------------------------- @fsdp-ts/collectives, mpi backend (mpi-comparison.ts)
interface MpiResults {
  mpi?: {
    rows: {
      worldSize: number;
      op: string;
      bytes: number;
      mpiBusbw: number;
      mpi4pyBusbw: number;
      /** The same non-blocking call made directly (absent in results from before it was measured). */
      mpi4pyNonBlockingBusbw?: number;
    }[];
    tcpAllReduce: { worldSize: number; bytes: number; tcpBusbw: number }[];
    fsdpStep?: { mpi: number[]; tcp: number[] };
    mpirunFlags: string[];
  };
  targets: { target: string; figure: string; met?: boolean | null }[];
}

function renderMpi(results: MpiResults): Rendered {
  const mpi = results.mpi;
  const targets = results.targets
    .filter((target) => /mpi|default backend/.test(target.target))
    .map((target) => ({ name: target.target, met: target.met ?? undefined, figure: target.figure }));
  if (mpi === undefined) return { tables: [], targets };
  const openMpi = (worldSize: number, bytes: number) =>
    mpi.rows.find((row) => row.worldSize === worldSize && row.op === 'allReduce' && row.bytes === bytes);
  const tables = [...new Set(mpi.rows.map((row) => row.worldSize))].map((worldSize) => ({
    title: `mpi backend, world size ${worldSize}: float32 bus bandwidth (under mpirun ${mpi.mpirunFlags.join(' ')})`,
    columns: ['backend', 'op', 'size', 'busbw GB/s'],
    peerColumn:
      'Open MPI called directly (mpi4py), same mpirun, interleaved, GB/s: the same non-blocking call (row / peer), and the blocking one',
    rows: [
      ...mpi.rows
        .filter((row) => row.worldSize === worldSize)
        .map((row) => ({
          cells: ['mpi', row.op, sizeLabel(row.bytes), row.mpiBusbw.toFixed(2)],
          peer:
            row.mpi4pyNonBlockingBusbw === undefined
              ? `blocking ${row.mpi4pyBusbw.toFixed(2)}; ${ratio(row.mpiBusbw, row.mpi4pyBusbw)}`
              : `${row.mpi4pyNonBlockingBusbw.toFixed(2)}; ${ratio(row.mpiBusbw, row.mpi4pyNonBlockingBusbw)}; blocking ${row.mpi4pyBusbw.toFixed(2)}`,
        })),
      ...mpi.tcpAllReduce
        .filter((row) => row.worldSize === worldSize)
        .map((row) => {
          const peer = openMpi(worldSize, row.bytes);
          return {
            cells: ['tcp (fsdp-run)', 'allReduce', sizeLabel(row.bytes), row.tcpBusbw.toFixed(2)],
            peer:
              peer === undefined
                ? undefined
                : `${peer.mpi4pyBusbw.toFixed(2)}; ${ratio(row.tcpBusbw, peer.mpi4pyBusbw)}`,
          };
        }),
    ],
  }));
  if (mpi.fsdpStep !== undefined)
    tables.push({
      title: 'FSDP communication-bound step (reference GPT, full-shard, 1 × 16 per rank, W=2), tokens/s',
      columns: ['backend', 'op', 'size', 'tokens/s'],
      peerColumn: 'tcp under fsdp-run, same run, alternating; row / peer',
      rows: [
        {
          cells: ['mpi', 'training step', '–', median(mpi.fsdpStep.mpi).toFixed(0)],
          peer: `${median(mpi.fsdpStep.tcp).toFixed(0)}; ${ratio(median(mpi.fsdpStep.mpi), median(mpi.fsdpStep.tcp))}`,
        },
      ],
    });
  return {
    notes: ["Medians of the rounds' medians; each op after a barrier, timed on rank 0, on both sides."],
    tables,
    targets,
  };
}

// ---------------------------------------------------------------- @fsdp-ts/fsdp (fsdp-training.ts)
interface FsdpRow {
  kind: string;
  worldSize: number;
  tokensPerSecond: Spread;
  cpuMs: Spread;
}

interface FsdpResults {
  settings?: Record<string, { batch: number; seqLen: number }>;
  throughput: Record<string, Record<string, FsdpRow>>;
  memory: { layers: number; kind: string; worldSize: number; measuredBytes: number; modelBytes: number }[];
  targets: { name: string; met: boolean; detail: string }[];
}

/** A row's peer: PyTorch's counterpart when it ran, else the row of this run it is weighed against. */
const fsdpPeers: [prefix: string, torch: string, fallback: string | undefined][] = [
  ['single', 'torch-single', undefined],
  ['no-shard', 'torch-ddp', 'single'],
  ['full-shard', 'torch-fsdp', 'no-shard'],
  ['shard-grad-op', 'torch-fsdp', 'no-shard'],
];

function headlineFsdp(results: FsdpResults): HeadlineRow[] {
  const rows: HeadlineRow[] = [];
  for (const setting of ['communication', 'compute']) {
    const ours = results.throughput[setting]?.['full-shard'];
    const torch = results.throughput[setting]?.['torch-fsdp'];
    const shape = results.settings?.[setting];
    if (ours === undefined || torch === undefined || shape === undefined) continue;
    rows.push({
      what: `FSDP full-shard, 2 processes, batch ${shape.batch} × ${shape.seqLen} per rank: tokens/s vs PyTorch FSDP`,
      ratio: speedup(ours.tokensPerSecond.median, torch.tokensPerSecond.median),
    });
  }
  return rows;
}

function renderFsdp(results: FsdpResults): Rendered {
  const mebibytes = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  const tables = Object.entries(results.throughput).map(([setting, rows]) => ({
    title: `${setting}-bound setting: tokens/s, world size 2 (one process for single)`,
    columns: ['run', 'W', 'tokens/s', 'CPU ms/step (rank 0)'],
    peerColumn: 'peer: tokens/s; row / peer',
    rows: Object.values(rows)
      .filter((row) => !row.kind.startsWith('torch-'))
      .map((row) => {
        const [, torch, fallback] = fsdpPeers.find(([prefix]) => row.kind.startsWith(prefix)) ?? [];
        const peer =
          (torch === undefined ? undefined : rows[torch]) ??
          (fallback === undefined ? undefined : rows[fallback]);
        return {
          cells: [row.kind, `${row.worldSize}`, spread(row.tokensPerSecond, 0), spread(row.cpuMs, 0)],
          peer:
            peer === undefined
              ? undefined
              : `${peer.kind} ${spread(peer.tokensPerSecond, 0)}; ${ratio(row.tokensPerSecond.median, peer.tokensPerSecond.median)}`,
        };
      }),
  }));
  if (results.memory.length > 0)
    tables.push({
      title:
        'Memory per rank: parameters + gradients + optimizer state at the peak of a step, against the model 16·P/N + 8·2·L',
      columns: ['layers', 'strategy', 'W', 'measured'],
      peerColumn: 'model; measured / model',
      rows: results.memory.map((row) => ({
        cells: [`${row.layers}`, row.kind, `${row.worldSize}`, mebibytes(row.measuredBytes)],
        peer: `${mebibytes(row.modelBytes)}; ${ratio(row.measuredBytes, row.modelBytes)}`,
      })),
    });
  return {
    tables,
    targets: results.targets.map((target) => ({ name: target.name, met: target.met, figure: target.detail })),
  };
}

// ---------------------------------------------------------------- @fsdp-ts/nn (gpt-training.ts)
interface NnResults {
  results: {
    batch: number;
    seq: number;
    target: number;
    rows: { contender: string; stepMs: Spread; cpuMs: Spread; tokensPerCpuSecond: number }[];
  }[];
}

function headlineNn(results: NnResults): HeadlineRow[] {
  return results.results.flatMap((shape) => {
    const torch = shape.rows.find((row) => row.contender === 'PyTorch');
    const blas = shape.rows.find((row) => row.contender === 'fsdp-ts (BLAS)');
    if (torch === undefined || blas === undefined) return [];
    const flushed = shape.rows.find((row) => row.contender === 'PyTorch (denormals flushed)');
    return [
      {
        what: `one process, reference GPT (4 layers, d 256), batch ${shape.batch} × ${shape.seq}: tokens per CPU-second vs PyTorch`,
        ratio: speedup(blas.tokensPerCpuSecond, torch.tokensPerCpuSecond),
      },
      ...(flushed === undefined
        ? []
        : [
            {
              what: `the same against PyTorch with torch.set_flush_denormal(True), batch ${shape.batch} × ${shape.seq}`,
              ratio: speedup(blas.tokensPerCpuSecond, flushed.tokensPerCpuSecond),
            },
          ]),
    ];
  });
}

function renderNn(results: NnResults): Rendered {
  const targets: Target[] = [];
  const tables = results.results.map((shape) => {
    const torch = shape.rows.find((row) => row.contender === 'PyTorch');
    const blas = shape.rows.find((row) => row.contender === 'fsdp-ts (BLAS)');
    const wasm = shape.rows.find((row) => row.contender === 'fsdp-ts (wasm)');
    targets.push({
      name: `fsdp-ts (BLAS) / PyTorch tokens per CPU-second >= ${shape.target}, batch ${shape.batch} × ${shape.seq}`,
      met:
        torch === undefined || blas === undefined
          ? undefined
          : blas.tokensPerCpuSecond / torch.tokensPerCpuSecond >= shape.target,
      figure:
        torch === undefined || blas === undefined
          ? `not measured (${blas === undefined ? 'no BLAS library loaded' : 'PyTorch skipped'})`
          : ratio(blas.tokensPerCpuSecond, torch.tokensPerCpuSecond),
    });
    return {
      title: `Reference GPT training step, batch ${shape.batch} × ${shape.seq}, one process`,
      columns: ['contender', 'CPU ms/step', 'step ms', 'tokens per CPU-second'],
      peerColumn: 'peer: tokens per CPU-second; row / peer',
      rows: shape.rows
        .filter((row) => row !== torch)
        .map((row) => {
          // PyTorch is every row's peer; without it, the BLAS and wasm kernels are each other's.
          const peer = torch ?? (row === blas ? wasm : blas);
          return {
            cells: [
              row.contender,
              spread(row.cpuMs, 1),
              spread(row.stepMs, 0),
              row.tokensPerCpuSecond.toFixed(0),
            ],
            peer:
              peer === undefined
                ? undefined
                : `${peer.contender} ${peer.tokensPerCpuSecond.toFixed(0)}; ${ratio(row.tokensPerCpuSecond, peer.tokensPerCpuSecond)}`,
          };
        }),
    };
  });
  return { tables, targets };
}

// ---------------------------------------------------------------- bench/multi-host (multi-host-bench.ts)
interface MultiHostResults {
  results: Record<string, { bandwidth: Record<string, Spread>; tokensPerSecond: Spread }>;
}

function renderMultiHost(results: MultiHostResults): Rendered {
  // Two hosts over a veth pair, against one host with both processes on loopback.
  const names = Object.keys(results.results);
  const loopback = names.find((name) => name.startsWith('loopback'));
  const peer = loopback === undefined ? undefined : results.results[loopback]!;
  const rows: Row[] = names
    .filter((name) => name !== loopback)
    .flatMap((name) => {
      const result = results.results[name]!;
      return [
        ...Object.entries(result.bandwidth).map(([metric, value]) => ({
          cells: [name, `${metric} busbw GB/s`, spread(value, 3)],
          peer:
            peer?.bandwidth[metric] === undefined
              ? undefined
              : `${spread(peer.bandwidth[metric], 3)}; ${ratio(value.median, peer.bandwidth[metric].median)}`,
        })),
        {
          cells: [name, 'training tokens/s', spread(result.tokensPerSecond, 0)],
          peer:
            peer === undefined
              ? undefined
              : `${spread(peer.tokensPerSecond, 0)}; ${ratio(result.tokensPerSecond.median, peer.tokensPerSecond.median)}`,
        },
      ];
    });
  return {
    tables: [
      {
        title: 'Two namespace hosts over a veth pair, against one host with two processes on loopback',
        columns: ['run', 'measure', 'median (min–max)'],
        peerColumn: `${loopback ?? 'loopback'}; row / peer`,
        rows,
      },
    ],
    targets: [],
  };
}

// ---------------------------------------------------------------- @fsdp-ts/fsdp (scale/scale-bench.ts)
interface ScaleResults {
  outcomes: {
    run: { model: string; strategy: string; worldSize: number; capBytes?: number; tag?: string };
    predictedPerRankBytes: number;
    skipped?: string;
    failed?: string;
    ranks?: { peakRssBytes: number }[];
    cgroupPeakBytes?: number[];
  }[];
}

function headlineScale(results: ScaleResults): HeadlineRow[] {
  // The largest model that trained under a cap, beside the run of it that did not fit.
  const trained = results.outcomes.filter(
    (outcome) =>
      outcome.run.capBytes !== undefined && outcome.skipped === undefined && outcome.failed === undefined,
  );
  const largest = trained.sort(
    (a, b) => b.predictedPerRankBytes * b.run.worldSize - a.predictedPerRankBytes * a.run.worldSize,
  )[0];
  if (largest === undefined) return [];
  const { run } = largest;
  const refused = results.outcomes.find(
    (outcome) =>
      outcome.run.model === run.model &&
      outcome.run.capBytes === run.capBytes &&
      outcome.failed !== undefined,
  );
  const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(0)} GiB`;
  return [
    {
      what: `${run.model}, ${run.strategy}, ${run.worldSize} processes capped at ${gib(run.capBytes!)} each: trains`,
      ratio:
        refused === undefined
          ? 'trained under the cap'
          : `trained; ${refused.run.strategy} at W=${refused.run.worldSize} under the same cap fails`,
    },
  ];
}

function renderScale(results: ScaleResults): Rendered {
  const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(2)} GiB`;
  return {
    tables: [
      {
        title:
          "Peak memory per rank (the cgroup peak when capped, else peak RSS) against the plan's prediction",
        columns: ['model', 'strategy', 'W', 'cap per rank', 'outcome', 'peak per rank'],
        peerColumn: 'predicted per rank; row / peer',
        rows: results.outcomes.map((outcome) => {
          const peaks = outcome.cgroupPeakBytes ?? outcome.ranks?.map((rank) => rank.peakRssBytes);
          const peak = peaks === undefined || peaks.length === 0 ? undefined : Math.max(...peaks);
          const { run } = outcome;
          return {
            cells: [
              `${run.model}${run.tag === undefined ? '' : ` (${run.tag})`}`,
              run.strategy,
              `${run.worldSize}`,
              run.capBytes === undefined ? 'none' : gib(run.capBytes),
              outcome.skipped !== undefined
                ? `skipped: ${outcome.skipped}`
                : outcome.failed !== undefined
                  ? `failed: ${outcome.failed.split('\n')[0]}`
                  : 'trained',
              peak === undefined ? '–' : gib(peak),
            ],
            peer: `${gib(outcome.predictedPerRankBytes)}${peak === undefined ? '' : `; ${ratio(peak, outcome.predictedPerRankBytes)}`}`,
          };
        }),
      },
    ],
    targets: [],
  };
}

// ---------------------------------------------------------------- @fsdp-ts/fsdp offload rows (scale/scale-offload-report.ts)
/** A row's FSDP options that differ from the defaults, as the run recorded them. */
function fsdpSettingsText(run: OffloadRunJson): string {
  const changed = [
    ...(run.activationCheckpointing === true ? ['activation checkpointing'] : []),
    ...(run.backwardPrefetch === false ? ['backwardPrefetch: false'] : []),
    ...(run.forwardPrefetch === false ? ['forwardPrefetch: false'] : []),
  ];
  return changed.length === 0 ? 'defaults' : changed.join(', ');
}
type OffloadPlacementJson = { optimizerState?: string; parameters?: string };
interface OffloadRunJson {
  offload?: OffloadPlacementJson;
  activationCheckpointing?: boolean;
  backwardPrefetch?: boolean;
  forwardPrefetch?: boolean;
}
interface ScaleOffloadResults {
  outcomes: (ScaleResults['outcomes'][number] & { run: OffloadRunJson })[];
  /** Per outcome (same order), the figures scale-offload-report.ts computed; null when it did not train. */
  figures: ({
    key: string;
    stepMs: number;
    cpuMs: number;
    computeMs: number;
    communicationMs: number;
    optimizerMs: number;
    offloadIoMs: number;
    offloadOverlappedMs?: number;
    offloadTransferMs: number;
    offloadReadBytes: number;
    offloadWrittenBytes: number;
    diskWriteBytesPerSecond?: number;
    diskReadBytesPerSecond?: number;
    ofDiskRate?: number;
  } | null)[];
  summary: {
    headline?: { key: string; outcome: string; capBytes: number };
    withoutOffload?: { key: string; outcome: string };
    cost?: { model: string; stepRatio: number; cpuRatio: number; withMs: number; withoutMs: number };
    ofDiskRate?: number;
  };
}

/** 'optimizer state disk', 'optimizer state disk, parameters disk' or 'no offload'. */
const placement = (offload: OffloadPlacementJson | undefined) => {
  const parts = [
    offload?.optimizerState === undefined || offload.optimizerState === 'none'
      ? ''
      : `optimizer state ${offload.optimizerState}`,
    offload?.parameters === 'disk' ? 'parameters disk' : '',
  ].filter((part) => part !== '');
  return parts.length === 0 ? 'no offload' : parts.join(', ');
};

/** "refused by the estimate", "killed at the cap", "trained", … (the text before any detail). */
const verdictOf = (outcome: string) => outcome.split(':')[0]!;

function headlineScaleOffload(results: ScaleOffloadResults): HeadlineRow[] {
  const { headline, withoutOffload, cost } = results.summary;
  const rows: HeadlineRow[] = [];
  if (headline !== undefined && headline.outcome === 'trained')
    rows.push({
      what: `${headline.key.split('/')[0]}, full-shard, 4 processes capped at ${(headline.capBytes / 2 ** 30).toFixed(0)} GiB each, optimizer state on disk: trains`,
      ratio: `trained; without offload ${withoutOffload === undefined ? 'not run' : verdictOf(withoutOffload.outcome)}`,
    });
  if (cost !== undefined)
    rows.push({
      what: `${cost.model} full-shard W=4, optimizer state on disk: step time against the same run without offload`,
      ratio: `${cost.stepRatio.toFixed(2)}× (${cost.stepRatio > 1.03 ? 'slower' : 'as fast'})`,
    });
  return rows;
}

function renderScaleOffload(results: ScaleOffloadResults): Rendered {
  const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(2)} GiB`;
  const seconds = (ms: number) => (ms / 1000).toFixed(1);
  const gb = (bytes: number) => (bytes / 1e9).toFixed(2);
  const trained = results.outcomes.flatMap((outcome, index) => {
    const figures = results.figures[index];
    return figures === null || figures === undefined ? [] : [{ outcome, figures }];
  });
  const { summary } = results;
  /** The step of the same model under the same cap without offload, where it trained; else why it did not. */
  const peerOf = (run: ScaleOffloadResults['outcomes'][number]['run']) => {
    const peer = trained.find(
      (other) =>
        other.outcome.run.offload === undefined &&
        other.outcome.run.model === run.model &&
        other.outcome.run.capBytes === run.capBytes,
    );
    if (peer !== undefined) return peer.figures.stepMs;
    const without = summary.withoutOffload;
    return without !== undefined && without.key.split('/')[0] === run.model
      ? `does not fit: ${verdictOf(without.outcome)}`
      : undefined;
  };
  const offloaded = trained.filter((row) => row.outcome.run.offload !== undefined);
  return {
    notes: [
      "Full-shard (W in each row's key) through fsdp-run --memory-per-rank, AdamW, batch 1 × 64 per rank, wasm; times are the slowest rank's median step. Offload I/O is the main thread's time in it (reads, waits for the I/O thread, writes, checksums), part of the backward and optimizer columns, not added to them; in parentheses the I/O thread's, overlapped with them. Reads the page cache serves let the offload pass the disk's own rate. The disk is probed by the same ranks at once before and after training: 256 MiB each written (8 MiB writes, fdatasync every 64 MiB, fsync) and read back with O_DIRECT.",
    ],
    tables: [
      {
        title:
          'Step time with offload, split into compute / communication / optimizer kernels / offload I/O (s)',
        columns: [
          'row',
          'offload',
          'cap per rank',
          'step',
          'compute',
          'communication',
          'optimizer',
          'offload I/O (I/O thread)',
          'FSDP settings',
        ],
        peerColumn: 'the same model and cap without offload, step s; row / peer',
        rows: offloaded.map(({ outcome, figures }) => {
          const peer = peerOf(outcome.run);
          return {
            cells: [
              figures.key,
              placement(outcome.run.offload),
              outcome.run.capBytes === undefined ? 'none' : gib(outcome.run.capBytes),
              seconds(figures.stepMs),
              seconds(figures.computeMs),
              seconds(figures.communicationMs),
              seconds(figures.optimizerMs),
              `${seconds(figures.offloadIoMs)} (${seconds(figures.offloadOverlappedMs ?? 0)})`,
              fsdpSettingsText(outcome.run),
            ],
            peer: typeof peer === 'number' ? `${seconds(peer)}; ${ratio(figures.stepMs, peer)}` : peer,
          };
        }),
      },
      {
        title: 'Offload I/O against the disk measured by the same ranks in the same run',
        columns: [
          'row',
          'offload GB read / written per step (all ranks)',
          'offload I/O s on the main thread (in read and write calls on either thread)',
          'offload GB/s',
        ],
        peerColumn: "disk GB/s write / read; the disk's time for the same bytes / the offload's",
        rows: offloaded.map(({ figures }) => ({
          cells: [
            figures.key,
            `${gb(figures.offloadReadBytes)} / ${gb(figures.offloadWrittenBytes)}`,
            `${seconds(figures.offloadIoMs)} (${seconds(figures.offloadTransferMs)})`,
            figures.offloadTransferMs > 0
              ? gb(
                  (figures.offloadReadBytes + figures.offloadWrittenBytes) /
                    (figures.offloadTransferMs / 1000),
                )
              : '–',
          ],
          peer:
            figures.diskWriteBytesPerSecond === undefined ||
            figures.diskReadBytesPerSecond === undefined ||
            figures.ofDiskRate === undefined
              ? undefined
              : `${gb(figures.diskWriteBytesPerSecond)} / ${gb(figures.diskReadBytesPerSecond)}; ${figures.ofDiskRate.toFixed(2)}×`,
        })),
      },
      {
        title:
          "Peak memory per rank (the cgroup's peak) against the plan's prediction (FSDP's estimate with offload inside)",
        columns: ['row', 'offload', 'cap per rank', 'outcome', 'peak per rank'],
        peerColumn: 'predicted per rank; row / peer',
        rows: results.outcomes.map((outcome) => {
          const peaks = outcome.cgroupPeakBytes ?? outcome.ranks?.map((rank) => rank.peakRssBytes);
          const peak = peaks === undefined || peaks.length === 0 ? undefined : Math.max(...peaks);
          const { run } = outcome;
          const result =
            outcome.skipped !== undefined
              ? outcome.skipped.startsWith('refused')
                ? verdictOf(outcome.skipped)
                : `skipped: ${outcome.skipped}`
              : outcome.failed !== undefined
                ? `failed: ${outcome.failed.split('\n')[0]}`
                : 'trained';
          return {
            cells: [
              `${run.model}${run.tag === undefined ? '' : ` (${run.tag})`}`,
              placement(run.offload),
              run.capBytes === undefined ? 'none' : gib(run.capBytes),
              result,
              peak === undefined ? '–' : gib(peak),
            ],
            peer: `${gib(outcome.predictedPerRankBytes)}${peak === undefined ? '' : `; ${ratio(peak, outcome.predictedPerRankBytes)}`}`,
          };
        }),
      },
    ],
    targets: [
      {
        name: 'the headline model trains under its cap with optimizer state on disk',
        met: summary.headline === undefined ? undefined : summary.headline.outcome === 'trained',
        figure:
          summary.headline === undefined
            ? 'not run'
            : `${summary.headline.key}: ${verdictOf(summary.headline.outcome)}; without offload: ${summary.withoutOffload === undefined ? 'not run' : verdictOf(summary.withoutOffload.outcome)}`,
      },
      {
        name: 'offload I/O >= 0.6× the disk rate measured in the same run',
        met: summary.ofDiskRate === undefined ? undefined : summary.ofDiskRate >= 0.6,
        figure: summary.ofDiskRate === undefined ? 'not measured' : `${summary.ofDiskRate.toFixed(2)}×`,
      },
    ],
  };
}

// ---------------------------------------------------------------- bench/cluster (cluster-bench.ts)
interface ClusterRow {
  name: string;
  tokensPerSecond: Spread;
  stepMs: Spread;
  computeStepMs: number;
  exposedCommunicationMs: number;
  modelWireBytesPerStep: number;
  countedWireBytesPerStep: Spread;
  boundMs: number;
  ofBound: number;
  limit: string;
  /** Results from before the CPU term (issue 34's profile) have neither. */
  terms?: { computeMs: number; wireMs: number; cpuMs?: number; orderMs?: number };
  binding?: string;
  jobCpu?: { demandMs: number; coresAvailable: number };
  attribution?: {
    profiledStepMs: number;
    mainThreadMs: Record<string, number>;
    communicationThreadCpuMs: number;
    mainRunnableMs: number;
  };
}

/** A row's attribution in one cell: the main thread's step by category, then the threads beside it. */
function clusterAttribution(row: ClusterRow): string {
  const attribution = row.attribution;
  if (attribution === undefined) return '';
  const main = Object.entries(attribution.mainThreadMs)
    .map(([name, ms]) => `${name} ${ms.toFixed(0)}`)
    .join(' · ');
  return `${main}; comm thread ${attribution.communicationThreadCpuMs.toFixed(0)} CPU, no core ${attribution.mainRunnableMs.toFixed(0)} (of ${attribution.profiledStepMs.toFixed(0)})`;
}

interface ClusterResults {
  skipped?: string;
  hybridShard?: string;
  cases?: {
    rate: string;
    setting: string;
    busy: boolean;
    batch: number;
    seqLen: number;
    linkBytesPerSecond: Spread;
    computeStepMs: Spread;
    torchComputeStepMs: Spread;
    rows: ClusterRow[];
  }[];
  targets?: { name: string; met: boolean | undefined; figure: string; stoppedBy?: string }[];
}

const clusterLabel = (item: NonNullable<ClusterResults['cases']>[number]) =>
  `${item.rate.replace('mbit', ' Mbit/s').replace('gbit', ' Gbit/s')}, batch ${item.batch} × ${item.seqLen} per rank${item.busy ? ', one busy process beside the job' : ''}`;

/** The README's cluster rows: the best fsdp-ts row against DDP and full-shard against PyTorch FSDP, compute-bound, quiet. */
function headlineCluster(results: ClusterResults): HeadlineRow[] {
  return (results.cases ?? [])
    .filter((item) => !item.busy && item.setting === 'compute' && item.rate !== '10gbit')
    .flatMap((item) => {
      const find = (name: string) => item.rows.find((row) => row.name === name);
      const ours = item.rows.filter((row) => row.name.startsWith('fsdp-ts') && !row.name.includes('2 × 2'));
      const best = ours.reduce<ClusterRow | undefined>(
        (a, b) => (a === undefined || b.tokensPerSecond.median > a.tokensPerSecond.median ? b : a),
        undefined,
      );
      const rows: HeadlineRow[] = [];
      const ddp = find('PyTorch DDP (gloo)');
      const fullShard = find('fsdp-ts full-shard');
      const torchFsdp = find('PyTorch FSDP (gloo)');
      const where = `2 hosts on a ${clusterLabel(item)}`;
      if (best !== undefined && ddp !== undefined)
        rows.push({
          what: `${where}: best fsdp-ts row (${best.name.replace('fsdp-ts ', '')}) tokens/s vs PyTorch DDP`,
          ratio: speedup(best.tokensPerSecond.median, ddp.tokensPerSecond.median),
        });
      if (fullShard !== undefined && torchFsdp !== undefined)
        rows.push({
          what: `${where}: full-shard tokens/s vs PyTorch FSDP`,
          ratio: speedup(fullShard.tokensPerSecond.median, torchFsdp.tokensPerSecond.median),
        });
      return rows;
    });
}

function renderCluster(results: ClusterResults): Rendered {
  if (results.skipped !== undefined || results.cases === undefined)
    return { notes: [`Skipped: ${results.skipped ?? 'no cases recorded'}.`], tables: [], targets: [] };
  const megabytes = (bytes: number) => (bytes / 1e6).toFixed(1);
  const tables = results.cases.map((item) => {
    const find = (name: string) => item.rows.find((row) => row.name === name);
    return {
      title: `${clusterLabel(item)}: link ${megabytes(item.linkBytesPerSecond.median)} MB/s per direction (raw TCP, both ways at once), compute ${item.computeStepMs.median.toFixed(0)} ms/step (PyTorch ${item.torchComputeStepMs.median.toFixed(0)})`,
      columns: [
        'row',
        'tokens/s',
        'step ms',
        'exposed comm ms',
        'wire MB/step per direction: model / counted',
        'bound ms: compute / wire / cpu / order',
        'of its bound',
        'stopped by',
        'where the step goes, ms/step (profiled launch)',
      ],
      peerColumn: 'peer tokens/s (PyTorch; hybrid: full-shard 2 × 2); row / peer',
      rows: item.rows.map((row) => {
        // PyTorch's rows and full-shard over 2 × 2 are the peers; they stand in the table with their own bound.
        const isPeer = row.name.startsWith('PyTorch') || row.name === 'fsdp-ts full-shard, 2 × 2';
        const peer = isPeer ? undefined : find(peerOf(row.name));
        return {
          cells: [
            row.name,
            spread(row.tokensPerSecond, 0),
            row.stepMs.median.toFixed(0),
            row.exposedCommunicationMs.toFixed(0),
            `${megabytes(row.modelWireBytesPerStep)} / ${megabytes(row.countedWireBytesPerStep.median)}`,
            row.terms === undefined
              ? `${row.boundMs.toFixed(0)} (max of compute, wire)`
              : `${row.terms.computeMs.toFixed(0)} / ${row.terms.wireMs.toFixed(0)} / ${row.terms.cpuMs?.toFixed(0) ?? '-'} / ${row.terms.orderMs?.toFixed(0) ?? '-'}`,
            percent(row.ofBound),
            row.binding === undefined ? row.limit : `${row.limit} (binding: ${row.binding})`,
            clusterAttribution(row),
          ],
          peer: isPeer
            ? '(peer)'
            : peer === undefined
              ? undefined
              : `${spread(peer.tokensPerSecond, 0)}; ${ratio(row.tokensPerSecond.median, peer.tokensPerSecond.median)}`,
        };
      }),
    };
  });
  return {
    notes: [
      "Two network-namespace hosts, one rank each, joined by a veth pair shaped with tc tbf in both directions; our rows step interleaved in one launch, PyTorch's launches rotate with it each round. Compute is both ranks stepping alone (no communication); exposed communication is step minus compute; wire bytes are the model's (bench/cluster/cluster-model.ts) against what the veth counted; a row's bound is max(compute, wire, cpu, order): wire is the model bytes / the raw link rate, cpu is the CPU the whole job demands per step (both hosts' processes, every thread, and the kernel's network work outside them) over the cores it has (less what the busy process and any other process used), order is forward + the bytes only backward can move / the link rate + the optimizer (fsdp-ts rows). 'stopped by' names the binding term for a row at ≥ 85% of its bound (link, compute, cores, step order), else its own overhead; results without the cpu term call a row far from max(compute, wire) CPU contention when its CPU time per step exceeds the compute's. 'where the step goes' is rank 0's main thread in a profiled launch after the measured ones (kernels: tfjs and WebAssembly; fsdp: fsdp-ts's JavaScript; other: autograd, optimizer and the rest; waiting: blocked on a collective; idle), then the communication thread's CPU and the time the main thread waited for a free core (bench/README.md#emulated-cluster).",
      ...(results.hybridShard === undefined ? [] : [`hybrid-shard: ${results.hybridShard}.`]),
    ],
    tables,
    targets: (results.targets ?? []).map((target) => ({
      name: target.name,
      met: target.met,
      figure: `${target.figure}${target.stoppedBy === undefined ? '' : ` (stopped by: ${target.stoppedBy})`}`,
    })),
  };
}

const renderer = <Results>(render: (results: Results) => Rendered) => render as (results: never) => Rendered;
const headliner = <Results>(headline: (results: Results) => HeadlineRow[]) =>
  headline as (results: never) => HeadlineRow[];

export const benchmarks: Benchmark[] = [
  {
    file: 'optim-adamw.json',
    title: '@fsdp-ts/optim: optimizer step bandwidth',
    command: 'npm run bench -w @fsdp-ts/optim',
    render: renderer(renderOptim),
  },
  {
    file: 'tensor.json',
    title: '@fsdp-ts/tensor: matMul, bfloat16 conversion, the tfjs bridge',
    command: 'npm run bench -w @fsdp-ts/tensor',
    render: renderer(renderTensor),
  },
  {
    file: 'flat-param.json',
    title: '@fsdp-ts/flat-param: flattening and view switching',
    command: 'npm run bench -w @fsdp-ts/flat-param',
    render: renderer(renderFlatParam),
  },
  {
    file: 'collectives-quick.json',
    title: '@fsdp-ts/collectives: bus bandwidth, quick sweep',
    command: 'npm run bench:collectives -- --quick --no-gloo --no-secure',
    render: renderer(renderCollectives),
  },
  {
    file: 'collectives-gloo.json',
    title: '@fsdp-ts/collectives: tcp against gloo',
    command: 'npm run bench:collectives -- --gloo-only',
    render: renderer(renderCollectives),
    headline: headliner(headlineCollectives),
  },
  {
    file: 'collectives.json',
    title: '@fsdp-ts/collectives: bus bandwidth, full sweep with gloo',
    command: 'npm run bench:collectives',
    render: renderer(renderCollectives),
  },
  {
    file: 'collectives-mpi.json',
    title: '@fsdp-ts/collectives: the mpi backend against Open MPI called directly',
    command: 'npm run bench:collectives -- --mpi-only',
    render: renderer(renderMpi),
  },
  {
    file: 'nn-gpt-training.json',
    title: '@fsdp-ts/nn: GPT training step against PyTorch',
    command: 'npm run bench -w @fsdp-ts/nn',
    render: renderer(renderNn),
    headline: headliner(headlineNn),
  },
  {
    file: 'fsdp-training.json',
    title: '@fsdp-ts/fsdp: training throughput and memory (the seed table)',
    command: 'npm run bench:fsdp',
    render: renderer(renderFsdp),
    headline: headliner(headlineFsdp),
  },
  {
    file: 'multi-host.json',
    title: 'Two hosts (network namespaces, needs root)',
    command: 'node --conditions=@fsdp-ts/source --import tsx bench/multi-host/multi-host-bench.ts',
    render: renderer(renderMultiHost),
  },
  {
    file: 'cluster.json',
    title: 'Emulated cluster: two hosts on a shaped link, against PyTorch (needs root)',
    command: 'npm run bench:cluster',
    render: renderer(renderCluster),
    headline: headliner(headlineCluster),
  },
  {
    file: 'scale.json',
    title: "@fsdp-ts/fsdp: scale (models larger than one rank's memory)",
    command: 'npm run bench:scale',
    render: renderer(renderScale),
    headline: headliner(headlineScale),
  },
  {
    file: 'scale-offload.json',
    title: '@fsdp-ts/fsdp: offload (optimizer state on disk; models larger than the ranks together)',
    command: 'BENCH_SCALE_OFFLOAD=only npm run bench:scale',
    render: renderer(renderScaleOffload),
    headline: headliner(headlineScaleOffload),
  },
];
