/**
 * `npm run bench:cluster` (needs root): an emulated cluster, bench/README.md#emulated-cluster.
 * Two network-namespace hosts joined by a veth pair shaped with `tc ... tbf` (shaped-link.ts), one
 * rank per host, the reference GPT trained on each link and at each batch by:
 *   fsdp-ts full-shard and no-shard, each with float32 and with bfloat16 on the wire, and
 *   `two-singles` (each rank steps alone, never communicating: the compute time of a step),
 *   all in one fsdp-run launch per host whose rows step interleaved (training-rank.ts);
 *   PyTorch 1.13 FSDP and DDP over gloo (torch-fsdp-training.py, one rank per host), and its
 *   two singles (its compute time), in launches interleaved with ours, rotated each round.
 * Beside them, in the same case: the raw TCP rate of the shaped link (raw-probe.ts). Each row
 * reports tokens/s, its compute and exposed communication per step, the bytes its host's veth
 * counted per step against the model's (cluster-model.ts), its bound and what stops it.
 *   --links a,b  (BENCH_LINKS=)  tc rates to run, default 200mbit,1gbit,10gbit
 *   --rounds n   (BENCH_ROUNDS=)  interleaved rounds, default 2
 *   --quick                 1gbit only, one round, fewer steps (checks that it all works)
 *   --no-busy               without the cases with a busy process beside the job
 *   --estimate              print the plan and its estimated duration, and exit
 *   --hybrid                the 2 hosts × 2 ranks rows even on fewer than 4 cores (checks they work)
 *   --no-profile            without the profiled launch of our rows per case (profile-attribution.ts)
 *   --torch-flush-denormal  PyTorch's ranks call torch.set_flush_denormal(True) (default: its default)
 *   --keep-profiles dir     copies the profiled launches' raw .cpuprofile files there (for DevTools)
 * Writes bench-results/cluster.json (`npm run bench:report -- --collect` takes it into
 * bench/results/); without root, `ip netns`, `tc` or PyTorch it says why and writes the reason.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GPTConfig } from '@fsdp-ts/nn';
import type { RunRequest, RunResult, Spread } from '../../packages/fsdp/bench/bench-config';
import { spread } from '../../packages/fsdp/bench/bench-config';
import { type JobCpuSample, kernelOutsideJobMs, othersMs } from '../../packages/fsdp/bench/job-cpu';
import type { PhaseSamples } from '../../packages/fsdp/bench/phase-profile';
import { torchUnavailableReason } from '../../packages/fsdp/bench/torch-peer';
import { startRun } from '../internal/run-context';
import {
  backwardWireBytes,
  clusterTargets,
  hybridRowNames,
  type JudgedCase,
  judgeRow,
  modelWireBytes,
  ourRowNames,
  parameterCounts,
  peerOf,
  type RowName,
} from './cluster-model';
import { attributeProfile, describeAttribution, type RowAttribution } from './profile-attribution';
import { bitsPerSecond, type Host, linkUnavailableReason, ShapedLink } from './shaped-link';

const benchmarkRun = startRun();
const root = fileURLToPath(new URL('../..', import.meta.url));
const output = join(root, 'bench-results/cluster.json');
const argument = (name: string) => {
  const index = process.argv.indexOf(name);
  return index < 0 ? undefined : process.argv[index + 1];
};
const quick = process.argv.includes('--quick');
const links = (
  argument('--links') ??
  process.env.BENCH_LINKS ??
  (quick ? '1gbit' : '200mbit,1gbit,10gbit')
).split(',');
const profiled = !process.argv.includes('--no-profile');
const torchFlushDenormal = process.argv.includes('--torch-flush-denormal');
const rounds = Number(argument('--rounds') ?? process.env.BENCH_ROUNDS ?? (quick ? 1 : 2));
for (const rate of links) bitsPerSecond(rate); // a typo fails here, before anything is built
if (!(Number.isInteger(rounds) && rounds >= 1))
  throw new Error(`--rounds (BENCH_ROUNDS) is a whole number ≥ 1; got ${rounds}`);

const config: GPTConfig = {
  vocabSize: 256,
  dModel: 256,
  nLayers: 4,
  nHeads: 4,
  seqLen: 128,
  tieEmbeddings: true,
};
const settings = {
  compute: { batch: 8, seqLen: 128, warmupSteps: quick ? 1 : 2, measuredSteps: quick ? 2 : 5 },
  communication: { batch: 1, seqLen: 16, warmupSteps: quick ? 2 : 3, measuredSteps: quick ? 5 : 15 },
};
type SettingName = keyof typeof settings;
interface Case {
  rate: string;
  setting: SettingName;
  busy: boolean;
}
/** Every link at both batches; the 1 Gbit/s link (or the first one run) again with a busy process. */
const busyRate = links.includes('1gbit') ? '1gbit' : links[0]!;
const cases: Case[] = [
  ...links.flatMap((rate) =>
    (['compute', 'communication'] as const).map((setting) => ({ rate, setting, busy: false })),
  ),
  ...(process.argv.includes('--no-busy')
    ? []
    : (['compute', 'communication'] as const).map((setting) => ({ rate: busyRate, setting, busy: true }))),
];
/**
 * Hybrid sharding needs two ranks per host, each with a core of its own beside the other host's
 * two: on 4 cores or more (or with --hybrid, to check the rows work) each case also runs
 * hybrid-shard and full-shard over 2 hosts × 2 ranks in one more launch.
 */
const cores = availableParallelism();
const withHybrid = cores >= 4 || process.argv.includes('--hybrid');
const hybridNote = withHybrid
  ? cores >= 4
    ? 'run: 2 hosts × 2 ranks'
    : `run because of --hybrid: 4 ranks on ${cores} cores measure the scheduler, not the link`
  : `not run: 2 hosts × 2 ranks need 4 processes with a core each and this machine has ${cores} (4 ranks on ${cores} cores would measure the scheduler, not the link)`;
/** P and R of [Note: cluster wire model] at a setting (the position embedding has seqLen rows). */
const countsOf = (setting: SettingName) => parameterCounts({ ...config, seqLen: settings[setting].seqLen });

// [Note: run time estimate] Per case and round: one launch of our rows, the PyTorch rows and its
// singles, each paying its start (tsx and the wasm backend; torch's import), then steps at the
// sum of compute and wire time (no overlap, so an upper estimate), on an idle 2-core machine.
const idleComputeMs: Record<SettingName, { ours: number; torch: number }> = {
  compute: { ours: 400, torch: 380 },
  communication: { ours: 40, torch: 25 },
};
function estimateSeconds(): number {
  let total = 0;
  for (const item of cases) {
    const bytesPerSecond = bitsPerSecond(item.rate) / 8;
    const steps = settings[item.setting].warmupSteps + settings[item.setting].measuredSteps;
    const compute = idleComputeMs[item.setting];
    const counts = countsOf(item.setting);
    const wire = (row: RowName) => (modelWireBytes(row, counts) / bytesPerSecond) * 1000;
    const oursMs = compute.ours + ourRowNames.reduce((sum, row) => sum + compute.ours + wire(row), 0);
    const torchMs = 3 * compute.torch + wire('PyTorch FSDP (gloo)') + wire('PyTorch DDP (gloo)');
    const hybridMs = withHybrid
      ? compute.ours + hybridRowNames.reduce((sum, row) => sum + compute.ours + wire(row), 0)
      : 0;
    total += 12 + 3 * 6 + 3 + (withHybrid ? 15 : 0) + (steps * (oursMs + torchMs + hybridMs)) / 1000;
    // The profiled launch of our rows, once per case: its start and its steps.
    if (profiled) total += (6 + (steps * oursMs) / 1000) / rounds;
  }
  return total * rounds;
}

const plan = `bench:cluster: links ${links.join(', ')}, ${rounds} round(s), ${cases.length} cases; estimated ${Math.ceil(estimateSeconds() / 60)} min on an idle 2-core machine (more under load)`;
if (process.argv.includes('--estimate')) {
  process.stdout.write(`${plan}\n`);
  process.exit(0);
}

function skip(why: string): never {
  process.stderr.write(`bench:cluster skipped: ${why}\n`);
  mkdirSync(dirname(output), { recursive: true });
  writeFileSync(
    output,
    `${JSON.stringify({ benchmark: 'cluster', context: benchmarkRun.finish(), skipped: why }, null, 2)}\n`,
  );
  process.exit(0);
}
const why = linkUnavailableReason() ?? torchUnavailableReason() ?? undefined;
if (why !== undefined) skip(why);

process.stderr.write(`${plan}\nbench:cluster: hybrid-shard ${hybridNote}\n`);

const launcher = join(
  dirname(
    createRequire(join(root, 'packages/fsdp/package.json')).resolve('@fsdp-ts/collectives/package.json'),
  ),
  'src/bin/fsdp-run.ts',
);
const rankScript = join(root, 'packages/fsdp/bench/training-rank.ts');
const torchScript = join(root, 'packages/fsdp/bench/torch-fsdp-training.py');
const python = process.env.BENCH_PYTHON ?? '/usr/bin/python3';
const secret = randomBytes(32).toString('hex');
const scratch = mkdtempSync(join(tmpdir(), 'fsdp-cluster-bench-'));
const link = new ShapedLink();

/** One row's measured steps: wall ms, rank 0's CPU ms, bytes rank 0's host sent, the whole job's CPU. */
interface Samples {
  stepMs: number[];
  cpuMs: number[];
  wireBytes: number[];
  jobCpu: JobCpuSample[];
  /** Our compute row only: the main thread's on-CPU ms in forward and in optimizer + zeroGrad (phase-profile.ts). */
  forwardMs: number[];
  optimizerMs: number[];
}
const emptySamples = (): Samples => ({
  stepMs: [],
  cpuMs: [],
  wireBytes: [],
  jobCpu: [],
  forwardMs: [],
  optimizerMs: [],
});
/** [Note: job CPU accounting]: rank 0 counts every process in the two hosts' namespaces, less the busy process. */
let busyProcess: ChildProcess | undefined;
const jobCpuSpecification = () =>
  JSON.stringify({
    namespaces: link.pair.namespaces.map((name) => `/run/netns/${name}`),
    ...(busyProcess?.pid === undefined ? {} : { busyPid: busyProcess.pid }),
  });

/**
 * One fsdp-run launch per host whose rows step interleaved: one rank per host (our rows and
 * 'compute'), or two (the hybrid rows and 'compute, 2 × 2').
 */
async function runOurs(
  setting: SettingName,
  ranksPerHost: 1 | 2,
  profileDirectory?: string,
): Promise<Map<string, Samples & { run: RunResult }>> {
  const names =
    ranksPerHost === 1
      ? (['compute', ...ourRowNames] as const)
      : (['compute, 2 × 2', ...hybridRowNames] as const);
  const requests: RunRequest[] = names.map((name, index) => ({
    kind: name.startsWith('compute')
      ? 'two-singles'
      : name.includes('hybrid-shard')
        ? 'hybrid-shard'
        : name.includes('full-shard')
          ? 'full-shard'
          : 'no-shard',
    config: { ...config, seqLen: settings[setting].seqLen },
    ...settings[setting],
    ...(name.includes('bfloat16')
      ? { mixedPrecision: { paramDtype: 'bfloat16' as const, reduceDtype: 'bfloat16' as const } }
      : {}),
    // The compute row's phases give the order term its forward and optimizer ([Note: which bound stops a row]).
    ...(profileDirectory !== undefined || name.startsWith('compute') ? { profilePhases: true } : {}),
    output: join(scratch, `row-${index}.json`),
  }));
  const port = String(link.nextPort());
  const flags = (host: Host) => [
    ...['--nnodes', '2', '--node-rank', String(host), '--nproc-per-node', String(ranksPerHost)],
    ...['--master-addr', link.pair.addresses[0], '--master-port', port, '--timeout', '600'],
  ];
  const node = [process.execPath, '--conditions=@fsdp-ts/source', '--import', 'tsx', launcher];
  const env = (host: Host) => ({
    FSDP_JOB_SECRET: secret,
    BENCH_WIRE_COUNTER: link.transmitCounter(host),
    BENCH_JOB_CPU: jobCpuSpecification(),
    ...(profileDirectory === undefined ? {} : { BENCH_CPU_PROFILE: profileDirectory }),
  });
  await link.both(
    [
      link.launch(0, [...node, ...flags(0), rankScript, JSON.stringify(requests)], env(0)),
      link.launch(1, [...node, ...flags(1), rankScript, JSON.stringify(requests)], env(1)),
    ],
    `fsdp-ts rows (${setting}, ${ranksPerHost} rank(s) per host)`,
  );
  return new Map(
    requests.map((request, index) => {
      const run = JSON.parse(readFileSync(request.output, 'utf8')) as RunResult;
      return [
        names[index]!,
        {
          stepMs: run.stepSamples,
          cpuMs: run.cpuSamples,
          wireBytes: run.wireBytesSamples ?? [],
          jobCpu: run.jobCpuSamples ?? [],
          forwardMs: run.phases?.forward ?? [],
          optimizerMs: (run.phases?.optimizer ?? []).map((ms, step) => ms + run.phases!.zeroGrad[step]!),
          run,
        },
      ];
    }),
  );
}

/** A PyTorch launch, one rank per host: 'fsdp' and 'ddp' over gloo, 'single' as two independent singles. */
async function runTorch(mode: 'fsdp' | 'ddp' | 'single', setting: SettingName): Promise<Samples> {
  const request = {
    mode,
    worldSize: 2,
    ...config,
    ...settings[setting],
    ...(torchFlushDenormal ? { flushDenormal: true } : {}),
  };
  const port = String(link.nextPort());
  const env = (host: Host) => ({
    // gloo binds the address the hostname resolves to (127.0.0.1) unless told the interface.
    GLOO_SOCKET_IFNAME: link.pair.links[host],
    BENCH_TORCH_RANK: String(host),
    BENCH_WIRE_COUNTER: link.transmitCounter(host),
    BENCH_JOB_CPU: jobCpuSpecification(),
    MASTER_ADDR: link.pair.addresses[0],
    MASTER_PORT: port,
  });
  const done = await link.both(
    [
      link.launch(0, [python, torchScript, JSON.stringify(request)], env(0)),
      link.launch(1, [python, torchScript, JSON.stringify(request)], env(1)),
    ],
    `PyTorch ${mode}`,
  );
  const line = JSON.parse(done[0]!.stdout.trim().split('\n').at(-1)!) as {
    stepMs: number[];
    cpuMs: number[];
    wireBytes?: number[];
    jobCpu?: JobCpuSample[];
  };
  return {
    stepMs: line.stepMs,
    cpuMs: line.cpuMs,
    wireBytes: line.wireBytes ?? [],
    jobCpu: line.jobCpu ?? [],
    forwardMs: [],
    optimizerMs: [],
  };
}

interface CaseSamples extends Case {
  linkBytesPerSecond: number[];
  /** 'compute' (our two singles), 'PyTorch compute' (its two singles), and each row. */
  rows: Map<string, Samples>;
  /** Per fsdp-ts row, from the case's profiled launch (profile-attribution.ts). */
  attribution: Map<string, RowAttribution>;
}
const measured: CaseSamples[] = cases.map((item) => ({
  ...item,
  linkBytesPerSecond: [],
  rows: new Map(),
  attribution: new Map(),
}));
const append = (into: CaseSamples, name: string, samples: Samples) => {
  const row = into.rows.get(name) ?? emptySamples();
  row.stepMs.push(...samples.stepMs);
  row.cpuMs.push(...samples.cpuMs);
  row.wireBytes.push(...samples.wireBytes);
  row.jobCpu.push(...samples.jobCpu);
  row.forwardMs.push(...samples.forwardMs);
  row.optimizerMs.push(...samples.optimizerMs);
  into.rows.set(name, row);
};

/**
 * The case's profiled launch (after its last measured round; not one of the measured launches):
 * our rows with rank 0's main thread under V8's profiler and its threads' counters per step,
 * attributed per row (see [Note: profile attribution]).
 */
async function profileOurs(item: CaseSamples): Promise<void> {
  const directory = mkdtempSync(join(scratch, 'profile-'));
  const runs = await runOurs(item.setting, 1, directory);
  const names = [...runs.keys()];
  const kinds = names.map((name) => runs.get(name)!.run.kind).join('+');
  const empty: Pick<PhaseSamples, 'communication' | 'otherThreads' | 'mainRunnable'> = {
    communication: [],
    otherThreads: [],
    mainRunnable: [],
  };
  const attributions = attributeProfile(
    join(directory, `${kinds}-rank0.cpuprofile`),
    names.map((name) => ({
      windows: runs.get(name)!.run.profileWindowsUs ?? [],
      phases: runs.get(name)!.run.phases ?? empty,
    })),
  );
  for (const [index, name] of names.entries()) item.attribution.set(name, attributions[index]!);
  const keep = argument('--keep-profiles');
  if (keep !== undefined) {
    mkdirSync(keep, { recursive: true });
    for (const file of readdirSync(directory).filter((name) => name.endsWith('.cpuprofile')))
      copyFileSync(
        join(directory, file),
        join(keep, `${item.rate}-${item.setting}${item.busy ? '-busy' : ''}-${file}`),
      );
  }
}

const started = performance.now();
try {
  for (let round = 0; round < rounds; round++) {
    for (const [index, item] of measured.entries()) {
      link.shape(item.rate);
      busyProcess = item.busy ? link.startBusyProcess() : undefined;
      item.linkBytesPerSecond.push(await link.probe(item.rate));
      // Rotated each round and case: ours, PyTorch FSDP, PyTorch DDP, PyTorch's singles; then FSDP, ...
      const launches = [
        async () => {
          for (const [name, samples] of await runOurs(item.setting, 1)) append(item, name, samples);
        },
        ...(withHybrid
          ? [
              async () => {
                for (const [name, samples] of await runOurs(item.setting, 2)) append(item, name, samples);
              },
            ]
          : []),
        async () => append(item, 'PyTorch FSDP (gloo)', await runTorch('fsdp', item.setting)),
        async () => append(item, 'PyTorch DDP (gloo)', await runTorch('ddp', item.setting)),
        async () => append(item, 'PyTorch compute', await runTorch('single', item.setting)),
      ];
      for (let position = 0; position < launches.length; position++)
        await launches[(position + round + index) % launches.length]!();
      if (profiled && round === rounds - 1) await profileOurs(item);
      busyProcess?.kill('SIGKILL');
      busyProcess = undefined;
      process.stderr.write(
        `round ${round + 1}/${rounds}: ${item.rate} ${item.setting}${item.busy ? ' + busy process' : ''} done (${((performance.now() - started) / 60_000).toFixed(1)} min)\n`,
      );
    }
  }
} finally {
  busyProcess?.kill('SIGKILL');
  link.remove();
  rmSync(scratch, { recursive: true, force: true });
}

/**
 * A row's CPU term (see [Note: job CPU accounting]): the job's CPU-ms per step (its processes
 * and the kernel's work outside them, means over the measured steps) over the cores it had (the
 * machine's, less the share of the row's wall time the busy process and any other process used).
 * Undefined without samples.
 */
function jobCpuOf(samples: Samples) {
  const count = samples.jobCpu.length;
  if (count === 0) return undefined;
  const mean = (pick: (sample: JobCpuSample) => number) =>
    samples.jobCpu.reduce((sum, sample) => sum + pick(sample), 0) / count;
  const wallMs = samples.stepMs.slice(0, count).reduce((a, b) => a + b, 0) / count;
  const kinds = [...new Set(samples.jobCpu.flatMap((sample) => Object.keys(sample.byKind)))];
  const processesMs = mean((sample) => sample.jobMs);
  const kernelMs = mean(kernelOutsideJobMs);
  const busyMs = mean((sample) => sample.busyMs);
  const others = mean(othersMs);
  // A quarter of a core at least: on a machine loaded far beyond the job (others' share near all
  // of it), the term says the cores bind without dividing by nothing.
  const coresAvailable = Math.max(0.25, cores - Math.min(others / wallMs, cores - 0.25));
  return {
    demandMs: processesMs + kernelMs,
    coresAvailable,
    processesMs,
    byKind: Object.fromEntries(kinds.map((kind) => [kind, mean((sample) => sample.byKind[kind] ?? 0)])),
    kernelOutsideJobMs: kernelMs,
    busyProcessMs: busyMs,
    othersMs: others,
    machine: {
      busyMs: mean((sample) => sample.machine.busyMs),
      softirqMs: mean((sample) => sample.machine.softirqMs),
      idleMs: mean((sample) => sample.machine.idleMs),
    },
  };
}

/** A case's rows as bench:report and the console show them. */
function summarise(item: CaseSamples) {
  const { batch, seqLen } = settings[item.setting];
  const tokensPerStep = (name: string) => (name.includes('2 × 2') ? 4 : 2) * batch * seqLen;
  const linkRate = spread(item.linkBytesPerSecond).median;
  const counts = countsOf(item.setting);
  const computeOf = (name: string) =>
    item.rows.get(
      name.startsWith('PyTorch') ? 'PyTorch compute' : name.includes('2 × 2') ? 'compute, 2 × 2' : 'compute',
    )!;
  const rows = [...ourRowNames, 'PyTorch FSDP (gloo)', 'PyTorch DDP (gloo)', ...hybridRowNames]
    .filter((name) => item.rows.has(name))
    .map((name) => {
      const samples = item.rows.get(name)!;
      const step: Spread = spread(samples.stepMs);
      const cpu = spread(samples.cpuMs);
      const counted = spread(samples.wireBytes);
      const model = modelWireBytes(name as RowName, counts);
      const computeMs = spread(computeOf(name).stepMs).median;
      const computeCpuMs = spread(computeOf(name).cpuMs).median;
      const jobCpu = jobCpuOf(samples);
      const compute = computeOf(name);
      const order =
        compute.forwardMs.length === 0
          ? undefined
          : {
              forwardMs: spread(compute.forwardMs).median,
              optimizerMs: spread(compute.optimizerMs).median,
              backwardWireBytes: backwardWireBytes(name as RowName, counts),
            };
      const verdict = judgeRow(
        { stepMs: step.median, cpuMs: cpu.median, computeCpuMs, countedWireBytes: counted.median },
        computeMs,
        model,
        linkRate,
        item.busy,
        jobCpu,
        order,
      );
      const attribution = item.attribution.get(name);
      return {
        name: name as RowName,
        tokensPerSecond: {
          min: tokensPerStep(name) / (step.max / 1000),
          median: tokensPerStep(name) / (step.median / 1000),
          max: tokensPerStep(name) / (step.min / 1000),
        },
        stepMs: step,
        cpuMs: cpu,
        computeStepMs: computeMs,
        computeCpuMs,
        modelWireBytesPerStep: model,
        countedWireBytesPerStep: counted,
        ...(jobCpu === undefined ? {} : { jobCpu }),
        ...(order === undefined ? {} : { order }),
        ...verdict,
        // A row below its bound: the sentence ends with where its step went.
        ...(attribution === undefined || verdict.limit !== 'own overhead'
          ? {}
          : { why: `${verdict.why}: ${describeAttribution(attribution)}` }),
        ...(attribution === undefined ? {} : { attribution }),
      };
    });
  return {
    rate: item.rate,
    setting: item.setting,
    busy: item.busy,
    batch,
    seqLen,
    parameters: counts,
    linkBytesPerSecond: spread(item.linkBytesPerSecond),
    computeStepMs: spread(item.rows.get('compute')!.stepMs),
    computeCpuMs: spread(item.rows.get('compute')!.cpuMs),
    computeJobCpu: jobCpuOf(item.rows.get('compute')!),
    torchComputeJobCpu: jobCpuOf(item.rows.get('PyTorch compute')!),
    torchComputeStepMs: spread(item.rows.get('PyTorch compute')!.stepMs),
    torchComputeCpuMs: spread(item.rows.get('PyTorch compute')!.cpuMs),
    rows,
  };
}

const summaries = measured.map(summarise);
const judged: JudgedCase[] = summaries.map((summary) => ({
  ...summary,
  rows: summary.rows.map((row) => ({
    ...row,
    tokensPerSecond: row.tokensPerSecond.median,
    stepMs: row.stepMs.median,
  })),
}));
const targets = clusterTargets(judged);

const megabytes = (bytes: number) => (bytes / 1e6).toFixed(1);
for (const summary of summaries) {
  console.log(
    `\n${summary.rate}, batch ${summary.batch} × ${summary.seqLen} per rank${summary.busy ? ', one busy process beside the job' : ''}: link ${megabytes(summary.linkBytesPerSecond.median)} MB/s per direction (raw TCP, both ways at once; tbf ${megabytes(bitsPerSecond(summary.rate) / 8)}), compute ${summary.computeStepMs.median.toFixed(0)} ms/step, CPU ${summary.computeCpuMs.median.toFixed(0)} (PyTorch ${summary.torchComputeStepMs.median.toFixed(0)}, CPU ${summary.torchComputeCpuMs.median.toFixed(0)})`,
  );
  console.log(
    '| row | tokens/s | step ms | CPU ms | job CPU ms | bound terms ms: compute / wire / cpu / order | exposed comm ms | wire MB/step per direction: model / counted | of bound | binding | vs peer |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const row of summary.rows) {
    const peer = summary.rows.find((other) => other.name === peerOf(row.name));
    const versus =
      row.name.startsWith('fsdp-ts') && row.name !== 'fsdp-ts full-shard, 2 × 2' && peer !== undefined
        ? `${(row.tokensPerSecond.median / peer.tokensPerSecond.median).toFixed(2)}×`
        : '';
    console.log(
      `| ${row.name} | ${row.tokensPerSecond.median.toFixed(0)} (${row.tokensPerSecond.min.toFixed(0)}–${row.tokensPerSecond.max.toFixed(0)}) | ${row.stepMs.median.toFixed(0)} | ${row.cpuMs.median.toFixed(0)} | ${row.jobCpu?.demandMs.toFixed(0) ?? '-'} | ${row.terms.computeMs.toFixed(0)} / ${row.terms.wireMs.toFixed(0)} / ${row.terms.cpuMs?.toFixed(0) ?? '-'} / ${row.terms.orderMs?.toFixed(0) ?? '-'} | ${row.exposedCommunicationMs.toFixed(0)} | ${megabytes(row.modelWireBytesPerStep)} / ${megabytes(row.countedWireBytesPerStep.median)} | ${(100 * row.ofBound).toFixed(0)}% | ${row.binding} | ${versus} |`,
    );
  }
  for (const row of summary.rows) {
    console.log(`  ${row.name}: ${row.why}`);
    if (row.attribution !== undefined) console.log(`    profile: ${describeAttribution(row.attribution)}`);
  }
}
console.log('\nTargets (issue 34):');
for (const target of targets)
  console.log(
    `- ${target.met === undefined ? 'n/a' : target.met ? 'met' : 'NOT met'}: ${target.name}: ${target.figure}${target.stoppedBy === undefined ? '' : ` — stopped by: ${target.stoppedBy}`}`,
  );
console.log(`- hybrid-shard: ${hybridNote}`);
mkdirSync(dirname(output), { recursive: true });
writeFileSync(
  output,
  `${JSON.stringify(
    {
      benchmark: 'cluster',
      context: benchmarkRun.finish(),
      rounds,
      links,
      settings,
      config,
      minutes: (performance.now() - started) / 60_000,
      hybridShard: hybridNote,
      cases: summaries,
      targets,
    },
    null,
    2,
  )}\n`,
);
process.stderr.write(`wrote ${output} after ${((performance.now() - started) / 60_000).toFixed(1)} min\n`);
