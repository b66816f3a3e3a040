/**
 * What bench/cluster weighs its rows against: the bytes each row's algorithm must put on the
 * link per step (the model), each row's bound, the issue's targets (issue 34) and, for each row
 * and target, the machine bound that stops it. Pure functions of the measured figures, tested in
 * cluster-model.test.ts.
 *
 * [Note: cluster wire model]
 * Two hosts, one rank each (W = 2), a ring: each pass over a buffer of B bytes sends
 * B·(W−1)/W from each rank, one direction of the link each. Per step and direction, for P
 * parameters of which R are in the root unit (embeddings and the final norm, never resharded
 * after forward: fsdp-ts's step-lifecycle.ts and PyTorch 1.13 alike) and L in the last unit
 * of forward (one transformer block):
 *   no-shard, PyTorch DDP   one all-reduce of the gradients = a reduce-scatter and an all-gather:
 *                           2 passes of P·r bytes (r = 4 float32, 2 bfloat16 on the wire)
 *   fsdp-ts full-shard      all-gather in forward (P), again in backward for all but the root and
 *                           the last unit, which stays gathered from its forward into its backward
 *                           ([Note: last unit stays gathered] in packages/fsdp) (P − R − L),
 *                           reduce-scatter of the gradients (P): ((2P − R − L)·g + P·r)·(W−1)/W
 *   PyTorch FSDP (gloo)     1.13 gathers the last unit again ((2P − R)·4), and its CPU shim
 *                           reduce-scatters with an all-reduce (torch-fsdp-training.py): 2·P·4
 * With 2 ranks per host (W = 4, ring order 0 1 | 2 3, so one ring edge crosses the link each way):
 *   full-shard, 2 × 2       full-shard's passes at (W−1)/W = 3/4 of each buffer per direction
 *   hybrid-shard, 2 × 2     gathers and reduce-scatters stay inside a host; each rank all-reduces
 *                           its P/2 gradient shard with its replica on the other host: 2 passes of
 *                           (P/2)·r·1/2 per rank, two ranks per host: P·r per direction
 * The wire term of a row's bound is the model bytes per direction / the raw link rate per
 * direction with both directions busy: a step that overlaps all of its communication with its
 * compute and sends nothing it does not need (the other terms: [Note: which bound stops a row]).
 */
import type { GPTConfig } from '@fsdp-ts/nn';

export type RowName =
  | 'fsdp-ts full-shard'
  | 'fsdp-ts full-shard, bfloat16 wire'
  | 'fsdp-ts no-shard'
  | 'fsdp-ts no-shard, bfloat16 wire'
  | 'PyTorch FSDP (gloo)'
  | 'PyTorch DDP (gloo)'
  // 2 hosts × 2 ranks (when the cores allow, see cluster-bench.ts):
  | 'fsdp-ts hybrid-shard, 2 × 2'
  | 'fsdp-ts hybrid-shard, 2 × 2, bfloat16 wire'
  | 'fsdp-ts full-shard, 2 × 2';

export const hybridRowNames = [
  'fsdp-ts hybrid-shard, 2 × 2',
  'fsdp-ts hybrid-shard, 2 × 2, bfloat16 wire',
  'fsdp-ts full-shard, 2 × 2',
] as const satisfies readonly RowName[];

export const ourRowNames = [
  'fsdp-ts full-shard',
  'fsdp-ts full-shard, bfloat16 wire',
  'fsdp-ts no-shard',
  'fsdp-ts no-shard, bfloat16 wire',
] as const satisfies readonly RowName[];

/**
 * Each row's peer on the same link: PyTorch FSDP for full-shard, DDP for no-shard; hybrid-shard's
 * is fsdp-ts full-shard over the same 4 ranks (PyTorch 1.13 has no hybrid sharding).
 */
export const peerOf = (row: string): RowName =>
  row.includes('hybrid-shard')
    ? 'fsdp-ts full-shard, 2 × 2'
    : row.includes('full-shard')
      ? 'PyTorch FSDP (gloo)'
      : 'PyTorch DDP (gloo)';

export interface ParameterCounts {
  /** P: every parameter once (the lmHead is tied to the token embedding). */
  total: number;
  /** R: the root unit's (embeddings, final norm). */
  root: number;
  /** L: the last unit of forward's (one transformer block). */
  lastUnit: number;
}

export function parameterCounts(config: GPTConfig): ParameterCounts {
  const d = config.dModel;
  const root = config.vocabSize * d + config.seqLen * d + 2 * d;
  const block = 12 * d * d + 13 * d; // qkv, out, up, down with biases, two layer norms
  return { total: root + config.nLayers * block, root, lastUnit: block };
}

/** The model's bytes per step in one direction (one rank's sends), W = 2 (see [Note: cluster wire model]). */
export function modelWireBytes(row: RowName, counts: ParameterCounts): number {
  const pass = (elements: number, bytesPerElement: number) => (elements * bytesPerElement * (2 - 1)) / 2;
  const width = row.includes('bfloat16') ? 2 : 4;
  const parameters = counts.total;
  const gathers = pass(2 * parameters - counts.root - counts.lastUnit, width);
  switch (row) {
    case 'PyTorch DDP (gloo)':
    case 'fsdp-ts no-shard':
    case 'fsdp-ts no-shard, bfloat16 wire':
      return 2 * pass(parameters, width);
    case 'fsdp-ts full-shard':
    case 'fsdp-ts full-shard, bfloat16 wire':
      return gathers + pass(parameters, width);
    case 'PyTorch FSDP (gloo)':
      return pass(2 * parameters - counts.root, 4) + 2 * pass(parameters, 4);
    case 'fsdp-ts full-shard, 2 × 2':
      return ((2 * parameters - counts.root - counts.lastUnit) * 4 + parameters * 4) * (3 / 4);
    case 'fsdp-ts hybrid-shard, 2 × 2':
    case 'fsdp-ts hybrid-shard, 2 × 2, bfloat16 wire':
      return parameters * width;
  }
}

/**
 * The part of modelWireBytes that can only move during backward (W = 2, one direction): the
 * gradient reduction, and full-shard's gathers again for backward (the units resharded after
 * their forward). Nothing of it can start before backward does, and the optimizer needs all of it.
 */
export function backwardWireBytes(row: RowName, counts: ParameterCounts): number {
  const pass = (elements: number, bytesPerElement: number) => elements * bytesPerElement * (1 / 2);
  const width = row.includes('bfloat16') ? 2 : 4;
  const parameters = counts.total;
  switch (row) {
    case 'fsdp-ts full-shard':
    case 'fsdp-ts full-shard, bfloat16 wire':
      return pass(parameters - counts.root - counts.lastUnit, width) + pass(parameters, width);
    case 'PyTorch FSDP (gloo)':
      return pass(parameters - counts.root, 4) + 2 * pass(parameters, 4);
    case 'fsdp-ts full-shard, 2 × 2':
      return ((parameters - counts.root - counts.lastUnit) * 4 + parameters * 4) * (3 / 4);
    default:
      return modelWireBytes(row, counts); // every byte is the gradient reduction
  }
}

/**
 * What stops a row: the link, the compute, the cores (the CPU the whole job demands, its
 * communication's work and the kernel's included), the busy process (in its cases, when the CPU
 * term is not measured), or nothing of the machine's.
 */
export type Limit = 'link' | 'compute' | 'cores' | 'step order' | 'CPU contention' | 'own overhead';

export interface RowFigures {
  stepMs: number;
  /** Rank 0's process CPU time per step (all threads). */
  cpuMs: number;
  /** Rank 0's CPU time per step of the same step without communication (the compute row). */
  computeCpuMs: number;
  /** Bytes rank 0's host sent per step, counted by its veth. */
  countedWireBytes: number;
}

/**
 * The CPU the job demands per step (packages/fsdp/bench/job-cpu.ts): every process of it, both
 * hosts, plus the kernel's work outside them, and the cores it has: the machine's less the share
 * of the step anything else used (the busy process in its cases, other processes on a loaded machine).
 */
export interface CpuDemand {
  demandMs: number;
  coresAvailable: number;
}

/**
 * The step's order: its forward and optimizer time (the compute row's main thread on a core in
 * each, phase-profile.ts) and the bytes that can only move in backward (backwardWireBytes).
 */
export interface StepOrder {
  forwardMs: number;
  optimizerMs: number;
  backwardWireBytes: number;
}

export interface RowVerdict {
  boundMs: number;
  /**
   * The bound's terms: compute, wire (model bytes / link rate), cpu (demand / cores) and order
   * (forward + backward's bytes / link rate + optimizer); the last two absent when not measured.
   */
  terms: { computeMs: number; wireMs: number; cpuMs?: number; orderMs?: number };
  /** The term that is the bound. */
  binding: 'compute' | 'wire' | 'cpu' | 'order';
  /** bound / step: 1 when the row runs at its bound. */
  ofBound: number;
  exposedCommunicationMs: number;
  limit: Limit;
  /** One sentence: how far the row is from its bound and what stops it. */
  why: string;
}

/** A row at ≥ this fraction of its bound is stopped by the machine (the issue's "every row ≥ 0.85 of its own bound"). */
export const atBound = 0.85;

/**
 * [Note: which bound stops a row]
 * A row's bound is max(compute, wire, cpu, order): the same step without communication, the
 * model's bytes over the measured link rate, the CPU the whole job demands per step (both hosts'
 * processes, every thread, the kernel's network work) over the cores it has (2, less what the busy
 * process and any other process used): two hosts on one machine share its cores, so
 * communication that costs CPU lengthens the step even when it overlaps the compute perfectly;
 * and the step's order: the gradients (and full-shard's re-gathers) move only in backward, and
 * the optimizer needs them all, so no step is shorter than forward + those bytes over the link +
 * the optimizer. At ≥ 0.85 of its bound a row is stopped by the binding term: the link, the
 * compute, the cores, or the step order (the link, for the bytes backward must move). Below it the
 * step spends time no term forces: waits the profile attributes (profile-attribution.ts), its
 * own overhead. Without the CPU term (results from before it was measured, or no /proc) a row
 * far from max(compute, wire) is called CPU contention when its CPU time per step exceeds the
 * compute row's by as much as its wall time exceeds the bound (or the busy process is beside it),
 * otherwise own overhead.
 */
export function judgeRow(
  figures: RowFigures,
  computeMs: number,
  wireModelBytes: number,
  linkBytesPerSecond: number,
  busy: boolean,
  cpu?: CpuDemand,
  order?: StepOrder,
): RowVerdict {
  const wireMs = (wireModelBytes / linkBytesPerSecond) * 1000;
  const cpuMs = cpu === undefined ? undefined : cpu.demandMs / cpu.coresAvailable;
  const orderMs =
    order === undefined
      ? undefined
      : order.forwardMs + (order.backwardWireBytes / linkBytesPerSecond) * 1000 + order.optimizerMs;
  const candidates = [
    ['compute', computeMs],
    ['wire', wireMs],
    ['cpu', cpuMs ?? 0],
    ['order', orderMs ?? 0],
  ] as const;
  const [binding, boundMs] = candidates.reduce((a, b) => (b[1] > a[1] ? b : a));
  const ofBound = boundMs / figures.stepMs;
  const exposedCommunicationMs = figures.stepMs - computeMs;
  const terms = `compute ${computeMs.toFixed(0)} ms, wire ${wireMs.toFixed(0)} ms${cpuMs === undefined ? '' : `, cpu ${cpuMs.toFixed(0)} ms (${cpu!.demandMs.toFixed(0)} CPU-ms over ${cpu!.coresAvailable.toFixed(2)} cores)`}${orderMs === undefined ? '' : `, order ${orderMs.toFixed(0)} ms (forward ${order!.forwardMs.toFixed(0)} + backward's bytes ${((order!.backwardWireBytes / linkBytesPerSecond) * 1000).toFixed(0)} + optimizer ${order!.optimizerMs.toFixed(0)})`}`;
  let limit: Limit;
  let why: string;
  if (ofBound >= atBound) {
    limit =
      binding === 'wire'
        ? 'link'
        : binding === 'cpu'
          ? 'cores'
          : binding === 'order'
            ? 'step order'
            : busy && cpuMs === undefined
              ? 'CPU contention'
              : 'compute';
    const stopper = {
      link: 'the link',
      compute: 'the compute',
      cores: 'the cores (the CPU the job demands)',
      'step order':
        "the step's order (what backward must move over the link, between forward and the optimizer)",
      'CPU contention': 'the busy process sharing the cores',
      'own overhead': '',
    }[limit];
    why = `at ${percent(ofBound)} of its bound (${terms}): ${stopper} stops it${ofBound > 1.05 ? ' (above 100%: the raw probe measured the link slower than this row used it, or the compute row ran slower than this row computes)' : ''}`;
  } else if (cpuMs !== undefined) {
    limit = 'own overhead';
    why = `at ${percent(ofBound)} of its bound (${terms}): ${(figures.stepMs - boundMs).toFixed(0)} ms/step above it that no term forces`;
  } else {
    const extraCpuMs = figures.cpuMs - figures.computeCpuMs;
    const extraWallMs = figures.stepMs - boundMs;
    limit = busy || extraCpuMs >= extraWallMs ? 'CPU contention' : 'own overhead';
    why =
      limit === 'CPU contention'
        ? `at ${percent(ofBound)} of its bound (${terms}): ${extraWallMs.toFixed(0)} ms/step above it, ${busy ? `with the busy process beside it (its CPU ${figures.cpuMs.toFixed(0)} ms/step, the compute's ${figures.computeCpuMs.toFixed(0)})` : `its CPU ${figures.cpuMs.toFixed(0)} ms/step, ${extraCpuMs.toFixed(0)} more than the compute's: communication work on the shared cores`}`
        : `at ${percent(ofBound)} of its bound (${terms}): ${extraWallMs.toFixed(0)} ms/step above it that neither the link nor the cores force (its CPU ${figures.cpuMs.toFixed(0)} ms/step, the compute's ${figures.computeCpuMs.toFixed(0)}): the row's own waiting`;
  }
  return {
    boundMs,
    terms: {
      computeMs,
      wireMs,
      ...(cpuMs === undefined ? {} : { cpuMs }),
      ...(orderMs === undefined ? {} : { orderMs }),
    },
    binding,
    ofBound,
    exposedCommunicationMs,
    limit,
    why,
  };
}

const percent = (value: number) => `${(100 * value).toFixed(0)}%`;

export interface JudgedRow extends RowVerdict {
  name: RowName;
  tokensPerSecond: number;
  stepMs: number;
}

export interface JudgedCase {
  rate: string;
  setting: 'compute' | 'communication';
  busy: boolean;
  rows: JudgedRow[];
}

export interface TargetResult {
  name: string;
  /** undefined: the case it needs was not run. */
  met: boolean | undefined;
  figure: string;
  /** When missed: what stops the row(s) it is about (from their verdicts). */
  stoppedBy?: string;
}

/** The issue's targets for the shaped links (issue 34, "Benchmark targets"), from the judged cases. */
export function clusterTargets(cases: readonly JudgedCase[]): TargetResult[] {
  const targets: TargetResult[] = [];
  const find = (rate: string, setting: string, busy: boolean) =>
    cases.find((item) => item.rate === rate && item.setting === setting && item.busy === busy);
  const row = (item: JudgedCase | undefined, name: RowName) =>
    item?.rows.find((entry) => entry.name === name);
  const stop = (...rows: (JudgedRow | undefined)[]) =>
    rows
      .filter((entry): entry is JudgedRow => entry !== undefined)
      .map((entry) => `${entry.name}: ${entry.why}`)
      .join('; ');
  const ratioTarget = (
    name: string,
    wanted: number,
    ours: JudgedRow | undefined,
    peer: JudgedRow | undefined,
  ) => {
    if (ours === undefined || peer === undefined) {
      targets.push({ name, met: undefined, figure: 'not run' });
      return;
    }
    const value = ours.tokensPerSecond / peer.tokensPerSecond;
    const met = value >= wanted;
    targets.push({
      name,
      met,
      figure: `${ours.name} ${value.toFixed(2)}× ${peer.name}`,
      ...(met ? {} : { stoppedBy: stop(ours) }),
    });
  };
  const best = (item: JudgedCase | undefined) =>
    item?.rows
      // One rank per host, as DDP runs: the 2 × 2 rows have twice the ranks.
      .filter((entry) => entry.name.startsWith('fsdp-ts') && !entry.name.includes('2 × 2'))
      .reduce<JudgedRow | undefined>(
        (a, b) => (a === undefined || b.tokensPerSecond > a.tokensPerSecond ? b : a),
        undefined,
      );
  for (const [rate, wanted] of [
    ['200mbit', 1.3],
    ['1gbit', 1.05],
  ] as const) {
    const item = find(rate, 'compute', false);
    ratioTarget(
      `${rate}, 8 × 128: best fsdp-ts row ≥ ${wanted}× PyTorch DDP tokens/s`,
      wanted,
      best(item),
      row(item, 'PyTorch DDP (gloo)'),
    );
    ratioTarget(
      `${rate}, 8 × 128: full-shard ≥ 1.5× PyTorch FSDP tokens/s`,
      1.5,
      row(item, 'fsdp-ts full-shard'),
      row(item, 'PyTorch FSDP (gloo)'),
    );
  }
  const slow = find('200mbit', 'compute', false);
  for (const strategy of ['full-shard', 'no-shard'] as const)
    ratioTarget(
      `200mbit, 8 × 128: ${strategy} bfloat16 wire ≥ 1.5× float32`,
      1.5,
      row(slow, `fsdp-ts ${strategy}, bfloat16 wire`),
      row(slow, `fsdp-ts ${strategy}`),
    );
  const fast = find('1gbit', 'compute', false);
  if (fast === undefined)
    targets.push({
      name: '1gbit, 8 × 128: exposed communication ≤ 25% of the step',
      met: undefined,
      figure: 'not run',
    });
  else
    for (const entry of fast.rows.filter((item) => item.name.startsWith('fsdp-ts'))) {
      const share = entry.exposedCommunicationMs / entry.stepMs;
      const met = share <= 0.25;
      targets.push({
        name: `1gbit, 8 × 128: ${entry.name} exposed communication ≤ 25% of the step`,
        met,
        figure: percent(Math.max(0, share)),
        ...(met ? {} : { stoppedBy: stop(entry) }),
      });
    }
  const small = find('1gbit', 'communication', false);
  ratioTarget(
    '1gbit, 1 × 16: no-shard ≥ 1.0× PyTorch DDP tokens/s',
    1.0,
    row(small, 'fsdp-ts no-shard'),
    row(small, 'PyTorch DDP (gloo)'),
  );
  const ours = (item: JudgedCase) => item.rows.filter((entry) => entry.name.startsWith('fsdp-ts'));
  const quiet = cases.filter((item) => !item.busy);
  const below = quiet.flatMap((item) =>
    ours(item)
      .filter((entry) => entry.ofBound < atBound)
      .map((entry) => ({ item, entry })),
  );
  const judged = quiet.flatMap(ours).length;
  targets.push({
    name: `every fsdp-ts row ≥ ${atBound} of its own bound (cases without the busy process)`,
    met: judged === 0 ? undefined : below.length === 0,
    figure: `${judged - below.length} of ${judged} rows`,
    ...(below.length === 0
      ? {}
      : {
          stoppedBy: below
            .map(({ item, entry }) => `${item.rate} ${item.setting} ${entry.name}: ${entry.limit}`)
            .join('; '),
        }),
  });
  return targets;
}
