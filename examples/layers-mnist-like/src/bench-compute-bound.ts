/**
 * The compute-bound half of `npm run bench`: the wide MLP (src/wide-model.ts) on a large global
 * batch, single-process model.fit against ShardedTrainer on W processes launched by fsdp-run
 * (tcp on loopback), each run a fresh process (src/bench-process.ts), the runs of every round in
 * a rotated order (interleaved), then one profiled pass that says where each side's time goes.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fsdpRunCommand } from '@fsdp-ts/collectives';
import type { ShardedTrainerStrategy } from '@fsdp-ts/layers';
import type { BenchProcessResult } from './bench-process';
import { phaseOrder, summarizeProfile } from './profile-summary';

export interface ComputeBoundOptions {
  samples: number;
  batchSize: number;
  hidden: number;
  rounds: number;
  strategies: ShardedTrainerStrategy[];
  profile: boolean;
  /** Bucket size of the overlap A/B (replicate, W=2, reductions during vs after backward); 0 skips it. */
  overlapBucketBytes: number;
  load: () => string;
}

interface Run {
  label: string;
  worldSize: number;
  /** null: single-process model.fit. */
  strategy: ShardedTrainerStrategy | null;
  /** The overlap A/B: reductions during (true) or after (false) backward, with this bucket size. */
  overlap?: { during: boolean; bucketBytes: number };
}

interface Measured {
  samplesPerSecond: number;
  cpuSeconds: number;
  ranks: BenchProcessResult[];
}

const tsx = ['--conditions=@fsdp-ts/source', '--import', 'tsx'];
const processScript = fileURLToPath(new URL('./bench-process.ts', import.meta.url));
const runTimeoutMs = 600_000;

function execute(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    const keep = (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-20_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => child.kill('SIGTERM'), runTimeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`bench process exited with ${code ?? signal}:\n${log}`));
    });
  });
}

async function measure(run: Run, options: ComputeBoundOptions, profilePrefix?: string): Promise<Measured> {
  const directory = mkdtempSync(join(tmpdir(), 'layers-bench-'));
  const out = join(directory, 'result.json');
  const scriptArgs = [
    processScript,
    '--mode',
    run.strategy === null ? 'single' : 'sharded',
    '--strategy',
    run.strategy ?? 'replicate',
    '--samples',
    String(options.samples),
    '--batch-size',
    String(options.batchSize),
    '--hidden',
    String(options.hidden),
    '--out',
    out,
    ...(profilePrefix === undefined ? [] : ['--profile', profilePrefix]),
    ...(run.overlap === undefined
      ? []
      : ['--overlap', run.overlap.during ? 'on' : 'off', '--bucket-bytes', String(run.overlap.bucketBytes)]),
  ];
  try {
    if (run.strategy === null) await execute([...tsx, ...scriptArgs]);
    else await execute([...fsdpRunCommand(), '--nproc-per-node', String(run.worldSize), ...scriptArgs]);
    const files =
      run.strategy === null ? [out] : [...Array(run.worldSize).keys()].map((rank) => `${out}.rank${rank}`);
    const ranks = files
      .filter(existsSync)
      .map((file) => JSON.parse(readFileSync(file, 'utf8')) as BenchProcessResult);
    if (ranks.length !== files.length)
      throw new Error(`${run.label}: ${files.length - ranks.length} result files missing`);
    // The epoch ends with a collective, so every rank ends it at about the same time; take the slowest.
    const seconds = Math.max(...ranks.map((rank) => rank.seconds));
    return {
      samplesPerSecond: options.samples / seconds,
      cpuSeconds: ranks.reduce((sum, rank) => sum + rank.cpuSeconds, 0),
      ranks,
    };
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const range = (values: number[], digits: number) =>
  `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;
const verdict = (met: boolean) => (met ? 'met' : 'not met');
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(2)} MiB`;

export async function benchComputeBound(options: ComputeBoundOptions): Promise<void> {
  const single: Run = { label: 'model.fit, 1 process', worldSize: 1, strategy: null };
  const one: Run = { label: 'ShardedTrainer replicate, W=1 (fsdp-run)', worldSize: 1, strategy: 'replicate' };
  const sharded: Run[] = options.strategies.map((strategy) => ({
    label: `ShardedTrainer ${strategy}, W=2 (fsdp-run)`,
    worldSize: 2,
    strategy,
  }));
  const overlapRuns: Run[] =
    options.overlapBucketBytes > 0
      ? [true, false].map((during) => ({
          label: `ShardedTrainer replicate, W=2, ${mib(options.overlapBucketBytes)} buckets, reductions ${during ? 'during' : 'after'} backward`,
          worldSize: 2,
          strategy: 'replicate' as const,
          overlap: { during, bucketBytes: options.overlapBucketBytes },
        }))
      : [];
  const runs = [single, one, ...sharded, ...overlapRuns];
  const results = new Map<Run, Measured[]>(runs.map((run) => [run, []]));
  console.log(
    `\n## Compute-bound: wide MLP (2 × ${options.hidden} hidden units), ${options.samples} samples, global batch ${options.batchSize}, Adam, one timed epoch per run after a 2-batch warm-up; every run a fresh process, ${options.rounds} rounds in rotated order\n`,
  );
  for (let round = 0; round < options.rounds; round++) {
    const order = runs.map((_run, index) => runs[(index + round) % runs.length]!);
    const line: string[] = [];
    for (const run of order) {
      const measured = await measure(run, options);
      results.get(run)!.push(measured);
      line.push(`${run.label} ${measured.samplesPerSecond.toFixed(0)}/s`);
    }
    console.log(`round ${round + 1}: ${line.join(', ')}; ${options.load()}`);
  }
  const first = results.get(single)![0]!.ranks[0]!;
  const backends = new Set(
    [...results.values()].flatMap((measured) =>
      measured.flatMap((entry) => entry.ranks.map((rank) => rank.backend)),
    ),
  );
  const backendNote =
    backends.size === 1
      ? `${first.backend} in every process`
      : `backends differ: ${[...backends].join('; ')}`;
  console.log(
    `\nP = ${first.parameters} parameters; ${backendNote}\n\n| run | samples/s median (min–max) | CPU s of the epoch, all ranks, median (min–max) |\n| --- | --- | --- |`,
  );
  for (const run of runs) {
    const measured = results.get(run)!;
    console.log(
      `| ${run.label} | ${range(
        measured.map((entry) => entry.samplesPerSecond),
        0,
      )} | ${range(
        measured.map((entry) => entry.cpuSeconds),
        2,
      )} |`,
    );
  }
  const perRound = (numerator: Run, denominator: Run) =>
    results
      .get(numerator)!
      .map((entry, round) => entry.samplesPerSecond / results.get(denominator)![round]!.samplesPerSecond);
  console.log('\n| ratio (per round) | median (min–max) | target |\n| --- | --- | --- |');
  const verdicts: string[] = [];
  for (const run of sharded) {
    const ratios = perRound(run, single);
    const met = median(ratios) >= 1.7;
    console.log(`| ${run.strategy} W=2 / model.fit | ${range(ratios, 2)} | ≥ 1.7: ${verdict(met)} |`);
    verdicts.push(
      `target W=2 ${run.strategy} >= 1.7x single model.fit (median ${median(ratios).toFixed(2)}): ${verdict(met)}`,
    );
  }
  for (const run of sharded)
    console.log(`| ${run.strategy} W=2 / ShardedTrainer W=1 | ${range(perRound(run, one), 2)} | (scaling) |`);
  console.log(
    `| ShardedTrainer W=1 / model.fit | ${range(perRound(one, single), 2)} | (same work, our loop and optimizer) |`,
  );
  if (overlapRuns.length === 2) {
    const ratios = perRound(overlapRuns[0]!, overlapRuns[1]!);
    console.log(
      `| replicate W=2, reductions during / after backward (${mib(options.overlapBucketBytes)} buckets) | ${range(ratios, 3)} | (the overlap's effect; > 1 faster) |`,
    );
  }
  console.log(`\n${verdicts.join('\n')}`);

  console.log('\nBytes per rank for training (rank 0, after the timed epoch), W=2:\n');
  console.log(
    '| strategy | total between steps | peak in a step | model | measured / model | within 10% |\n| --- | --- | --- | --- | --- | --- |',
  );
  for (const run of sharded) {
    const memory = results.get(run)!.at(-1)!.ranks[0]!.memory!;
    console.log(
      `| ${run.strategy} | ${mib(memory.total)} | ${mib(memory.peak)} | ${mib(memory.model)} | ${memory.ratio.toFixed(3)} | ${verdict(memory.met)} |`,
    );
  }

  if (!options.profile) return;
  const directory = mkdtempSync(join(tmpdir(), 'layers-bench-profile-'));
  try {
    const profiled = [single, ...sharded];
    const columns: { label: string; phases: Map<string, number>; totalMs: number }[] = [];
    for (const run of profiled) {
      const prefix = join(directory, run.strategy ?? 'single');
      await measure(run, options, prefix);
      const summary = summarizeProfile(
        `${prefix}.${run.strategy === null ? 'single' : 'sharded'}-rank0.cpuprofile`,
      );
      columns.push({
        label: run.strategy === null ? 'model.fit' : `${run.strategy} W=2, rank 0`,
        ...summary,
      });
    }
    console.log(
      `\nWhere the timed epoch's main-thread time goes (V8 CPU profile, ms; ${options.load()}):\n\n| phase | ${columns.map((column) => column.label).join(' | ')} |\n| --- | ${columns.map(() => '---').join(' | ')} |`,
    );
    for (const phase of phaseOrder) {
      if (columns.every((column) => (column.phases.get(phase) ?? 0) < 0.5)) continue;
      console.log(
        `| ${phase} | ${columns.map((column) => (column.phases.get(phase) ?? 0).toFixed(0)).join(' | ')} |`,
      );
    }
    console.log(`| total | ${columns.map((column) => column.totalMs.toFixed(0)).join(' | ')} |`);
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}
