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
