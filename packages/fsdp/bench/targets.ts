/** The benchmark's targets (issue 7; the seed table of issue 10) and the memory model. */
import type { RunKind, RunResult } from './bench-config';

export interface TargetCheck {
  name: string;
  met: boolean;
  detail: string;
}

/** Units whose gathered buffers are alive at once under full-shard: the running one and one prefetched. */
export const UNITS_GATHERED_AT_ONCE = 2;

/**
 * The memory model, bytes per rank: 16·P/N (float32 parameter, gradient and two Adam moments,
 * sharded) + 8·g·L (the gathered parameter and gradient of g units of at most L elements). No-shard
 * keeps everything whole: 16·P.
 */
export function memoryModelBytes(
  kind: RunKind,
  parameters: number,
  worldSize: number,
  largestUnitNumel: number,
): number {
  if (kind.startsWith('no-shard') || kind === 'single') return 16 * parameters;
  return (16 * parameters) / worldSize + 8 * UNITS_GATHERED_AT_ONCE * largestUnitNumel;
}

type Rows = Partial<Record<RunKind, RunResult>>;

function ratio(rows: Rows, numerator: RunKind, denominator: RunKind): number {
  return (
    (rows[numerator]?.tokensPerSecond.median ?? Number.NaN) /
    (rows[denominator]?.tokensPerSecond.median ?? Number.NaN)
  );
}

function ratioTarget(
  name: string,
  rows: Rows | undefined,
  numerator: RunKind,
  denominator: RunKind,
  at: number,
  atMost = false,
): TargetCheck[] {
  if (rows === undefined) return [];
  const value = ratio(rows, numerator, denominator);
  if (Number.isNaN(value)) return [];
  const met = atMost ? value <= at : value >= at;
  return [
    {
      name,
      met,
      detail: `${numerator} / ${denominator} = ${value.toFixed(3)} (target ${atMost ? '≤' : '≥'} ${at})`,
    },
  ];
}

export function checkTargets(
  throughput: Partial<Record<'compute' | 'communication', Rows>>,
  memory: { layers: number; kind: RunKind; worldSize: number; measuredBytes: number; modelBytes: number }[],
): TargetCheck[] {
  const { compute, communication } = throughput;
  const checks: TargetCheck[] = [
    ...ratioTarget('compute-bound: no-shard ≥ 1.7× single process', compute, 'no-shard', 'single', 1.7),
    ...ratioTarget(
      'compute-bound: shard-grad-op ≥ 0.95× no-shard',
      compute,
      'shard-grad-op',
      'no-shard',
      0.95,
    ),
    ...ratioTarget('compute-bound: full-shard ≥ 0.75× no-shard', compute, 'full-shard', 'no-shard', 0.75),
    ...ratioTarget(
      'communication-bound: flattened full-shard ≥ 1.5× unflattened',
      communication,
      'full-shard',
      'full-shard-unflat',
      1.5,
    ),
  ];
  for (const [name, rows] of [
    ['compute-bound', compute],
    ['communication-bound', communication],
  ] as const) {
    if (rows === undefined) continue;
    const keep = ratio(rows, 'full-shard-submodule-optimizer', 'full-shard-flat-optimizer');
    // Rows left out (BENCH_KINDS) are not measured, not missed.
    if (!Number.isNaN(keep))
      checks.push({
        name: `${name}: views with a per-submodule optimizer within 3% of the flat optimizer`,
        met: Math.abs(keep - 1) <= 0.03,
        detail: `full-shard-submodule-optimizer / full-shard-flat-optimizer = ${keep.toFixed(3)}`,
      });
    checks.push(
      ...ratioTarget(
        `${name}: flattened FSDP ≥ unflattened data parallel`,
        rows,
        'full-shard',
        'no-shard-unflat',
        1,
      ),
    );
  }
  for (const row of memory.filter((entry) => entry.layers === 4)) {
    const value = row.measuredBytes / row.modelBytes;
    checks.push({
      name: `memory ${row.kind} W=${row.worldSize} within 10% of the model`,
      met: Math.abs(value - 1) <= 0.1,
      detail: `measured / model = ${value.toFixed(3)}`,
    });
  }
  const deep = memory.filter((entry) => entry.layers === 16 && entry.worldSize === 2);
  const deepFull = deep.find((entry) => entry.kind === 'full-shard');
  const deepNone = deep.find((entry) => entry.kind === 'no-shard');
  if (deepFull !== undefined && deepNone !== undefined) {
    const value = deepFull.measuredBytes / deepNone.measuredBytes;
    checks.push({
      name: '16 layers, W=2: full-shard ≤ 0.6× no-shard',
      met: value <= 0.6,
      detail: `full-shard / no-shard = ${value.toFixed(3)}`,
    });
  }
  return checks;
}

export interface Issue15Check {
  name: string;
  /** null: measured by another benchmark, not this run. */
  met: boolean | null;
  detail: string;
}

/** Every target of issue 15, met / not met from this run (the collectives ones by bench:collectives). */
export function checkIssue15Targets(
  throughput: Partial<Record<'compute' | 'communication', Rows>>,
): Issue15Check[] {
  const { compute, communication } = throughput;
  const checks: Issue15Check[] = [];
  const add = (
    name: string,
    rows: Rows | undefined,
    numerator: RunKind,
    denominator: RunKind,
    at: number,
  ) => {
    if (rows === undefined) return;
    if (rows[numerator] === undefined || rows[denominator] === undefined) {
      checks.push({ name, met: null, detail: `${numerator} or ${denominator} not run (BENCH_KINDS)` });
      return;
    }
    const value = ratio(rows, numerator, denominator);
    checks.push({
      name,
      met: Number.isFinite(value) ? value >= at : false,
      detail: `${numerator} / ${denominator} = ${value.toFixed(3)} (target ≥ ${at})`,
    });
  };
  add('compute-bound full-shard / no-shard', compute, 'full-shard', 'no-shard', 0.9);
  add('compute-bound no-shard / single process (2 cores, 2 ranks)', compute, 'no-shard', 'single', 1.8);
  for (const [name, rows] of [
    ['compute-bound', compute],
    ['communication-bound', communication],
  ] as const) {
    add(
      `${name} views (one AdamW over model.parameters()) / flat-shard optimizer`,
      rows,
      'full-shard',
      'full-shard-flat-optimizer',
      0.97,
    );
    add(
      `${name} views (per-submodule groups) / flat-shard optimizer`,
      rows,
      'full-shard-submodule-optimizer',
      'full-shard-flat-optimizer',
      0.97,
    );
  }
  add(
    'communication-bound flattened / unflattened full-shard',
    communication,
    'full-shard',
    'full-shard-unflat',
    1.5,
  );
  add('communication-bound FSDP W=2 / PyTorch 1.13 FSDP W=2', communication, 'full-shard', 'torch-fsdp', 1.0);
  add('communication-bound no-shard W=2 / PyTorch 1.13 DDP W=2', communication, 'no-shard', 'torch-ddp', 1.0);
  for (const name of [
    'tcp float32 all-reduce 16 MiB, W=2 and 3, ≥ gloo at 1–64 MiB',
    'bfloat16 conversion ≥ 1 G elements/s; bf16 on the wire ≥ 1.3× float32 for tcp all-gather and reduce-scatter',
    'shm busbw 16 MiB, W=2 ≥ 6 GB/s',
  ])
    checks.push({ name, met: null, detail: 'see npm run bench:collectives (issue 15 point 4)' });
  return checks;
}

/**
 * The ceiling of any two-rank row here: two single-process steps at once, never communicating
 * ('two-singles'). Its ratio to one single process is what the machine's two cores give; no-shard's
 * ratio to it is what data parallelism costs on top.
 */
export function ceilingLines(compute: Rows | undefined): string[] {
  if (compute?.['two-singles'] === undefined) return [];
  const lines = ['\nceiling (compute-bound): two independent single-process steps at once, no communication'];
  const ceiling = ratio(compute, 'two-singles', 'single');
  if (Number.isFinite(ceiling))
    lines.push(
      `- two-singles / single = ${ceiling.toFixed(3)} (the most any 2-rank row can reach on this machine)`,
    );
  const noShard = ratio(compute, 'no-shard', 'two-singles');
  if (Number.isFinite(noShard))
    lines.push(
      `- no-shard / two-singles = ${noShard.toFixed(3)} (1.0: data parallelism costs nothing on top)`,
    );
  return lines;
}
