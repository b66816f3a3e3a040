/**
 * `npm run bench:cluster` (needs root): an emulated cluster. Two network-namespace hosts joined by
 * a veth pair whose both ends are shaped with `tc ... tbf` (200 Mbit/s, 1 Gbit/s, 10 Gbit/s), one
 * rank per host, the reference GPT trained by:
 *   fsdp-ts full-shard and no-shard, each with float32 and with bfloat16 on the wire, and
 *   `two-singles` (each rank steps alone, never communicating: the compute time of a step),
 *   all in one fsdp-run launch per host whose rows step interleaved (training-rank.ts);
 *   PyTorch 1.13 FSDP and DDP over gloo on the same shaped link (torch-fsdp-training.py, one rank
 *   per host), in launches interleaved with ours, rotated each round.
 * Beside them, in the same run: the raw TCP rate of the shaped link in both directions at once
 * (raw-probe.ts). Each row reports tokens/s, its exposed communication per step (step time minus
 * the two-singles compute time), the bytes the model puts on the wire per step against what the
 * link counted, and its bound: max(compute time, bytes per step / the raw link rate).
 *   --quick        1 Gbit/s only, one round, fewer steps
 *   --rates a,b    tc rates to run (e.g. 200mbit,1gbit)
 *   --rounds n     interleaved rounds (default 2)
 * Writes bench-results/cluster.json (bench:report renders it); without root, iproute2's tc or
 * PyTorch it writes why it skipped and exits 0.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GPTConfig } from '@fsdp-ts/nn';
import type { RunRequest, RunResult, Spread } from '../../packages/fsdp/bench/bench-config';
import { spread } from '../../packages/fsdp/bench/bench-config';
import { torchUnavailableReason } from '../../packages/fsdp/bench/torch-peer';
import { createNamespacePair } from '../../packages/fsdp/test/multi-host-netns';
import { startRun } from '../internal/run-context';

const benchmarkRun = startRun();
const root = fileURLToPath(new URL('../..', import.meta.url));
const output = join(root, 'bench-results/cluster.json');
const argument = (name: string) => {
  const index = process.argv.indexOf(name);
  return index < 0 ? undefined : process.argv[index + 1];
};
const quick = process.argv.includes('--quick');
const rates = (argument('--rates') ?? (quick ? '1gbit' : '200mbit,1gbit,10gbit')).split(',');
const rounds = Number(argument('--rounds') ?? (quick ? 1 : 2));

/** Why this machine cannot run the benchmark, or undefined. */
function unavailable(): string | undefined {
  if (process.getuid?.() !== 0)
    return 'needs root (it creates network namespaces and shapes their link with tc)';
  for (const tool of ['ip', 'tc'])
    if (spawnSync(tool, ['-V']).error !== undefined)
      return `\`${tool}\` is missing: apt-get install iproute2`;
  return torchUnavailableReason() ?? undefined;
}

const why = unavailable();
if (why !== undefined) {
  process.stderr.write(`bench:cluster skipped: ${why}\n`);
  mkdirSync(dirname(output), { recursive: true });
  writeFileSync(
    output,
    `${JSON.stringify({ benchmark: 'cluster', context: benchmarkRun.finish(), skipped: why }, null, 2)}\n`,
  );
  process.exit(0);
}

const launcher = join(
  dirname(
    createRequire(join(root, 'packages/fsdp/package.json')).resolve('@fsdp-ts/collectives/package.json'),
  ),
  'src/bin/fsdp-run.ts',
);
const rankScript = join(root, 'packages/fsdp/bench/training-rank.ts');
const rawProbe = fileURLToPath(new URL('./raw-probe.ts', import.meta.url));
const torchScript = join(root, 'packages/fsdp/bench/torch-fsdp-training.py');
const python = process.env.BENCH_PYTHON ?? '/usr/bin/python3';
const config: GPTConfig = {
  vocabSize: 256,
  dModel: 256,
  nLayers: 4,
  nHeads: 4,
  seqLen: 128,
  tieEmbeddings: true,
};
const settings = {
  compute: { batch: 8, seqLen: 128, warmupSteps: quick ? 1 : 2, measuredSteps: quick ? 3 : 6 },
  communication: { batch: 1, seqLen: 16, warmupSteps: 3, measuredSteps: quick ? 10 : 30 },
};
type SettingName = keyof typeof settings;
/** What each case runs: a rate, a setting, and whether a busy process shares each host's cores. */
const cases: { rate: string; setting: SettingName; busy: boolean }[] = [
  ...rates.map((rate) => ({ rate, setting: 'compute' as const, busy: false })),
  ...(rates.includes('1gbit')
    ? [
        { rate: '1gbit', setting: 'communication' as const, busy: false },
        { rate: '1gbit', setting: 'compute' as const, busy: true },
      ]
    : []),
];

/** Our rows: name, the training-rank kind, its wire dtype, and the bytes each rank sends per step in units of P. */
const ourRows = [
  { name: 'fsdp-ts full-shard', kind: 'full-shard', bfloat16: false },
  { name: 'fsdp-ts full-shard, bfloat16 wire', kind: 'full-shard', bfloat16: true },
  { name: 'fsdp-ts no-shard', kind: 'no-shard', bfloat16: false },
  { name: 'fsdp-ts no-shard, bfloat16 wire', kind: 'no-shard', bfloat16: true },
] as const;
const torchRows = [
  { name: 'PyTorch FSDP (gloo)', mode: 'fsdp' },
  { name: 'PyTorch DDP (gloo)', mode: 'ddp' },
] as const;

/**
 * Bytes one rank sends per step at W=2, in units of the parameter count P: a ring pass moves
 * (W-1)/W of the buffer. Full-shard gathers the parameters in forward and again in backward and
 * reduce-scatters the gradients (3 passes); no-shard all-reduces them (a reduce-scatter and an
 * all-gather: 2 passes). PyTorch 1.13's FSDP on the CPU shim reduce-scatters with an all-reduce
 * (4 passes, see torch-fsdp-training.py).
 */
function wireBytesPerParameter(row: string): number {
  const pass = (bytesPerElement: number) => (bytesPerElement * (2 - 1)) / 2;
  if (row === 'PyTorch FSDP (gloo)') return 2 * pass(4) + 2 * pass(4);
  if (row === 'PyTorch DDP (gloo)') return 2 * pass(4);
  const width = row.includes('bfloat16') ? 2 : 4;
  return row.includes('full-shard') ? 3 * pass(width) : 2 * pass(width);
}

const pair = createNamespacePair({ stem: 'fsdp-clb', prefix: '10.231.3' });
const secret = randomBytes(32).toString('hex');
const scratch = mkdtempSync(join(tmpdir(), 'fsdp-cluster-bench-'));
let portCounter = 29700;

function inHost(host: 0 | 1, argv: string[]): [string, string[]] {
  return ['ip', ['netns', 'exec', pair.namespaces[host], ...argv]];
}

function shape(rate: string): void {
  const bitsPerSecond =
    Number.parseFloat(rate) * ({ k: 1e3, m: 1e6, g: 1e9 }[/[kmg]/.exec(rate)?.[0] ?? 'm'] ?? 1e6);
  // tbf drops a packet larger than its bucket: 10 ms of traffic, and never less than a 64 KiB GSO segment.
  const burst = Math.max(128 * 1024, Math.round(bitsPerSecond / 8 / 100));
  for (const host of [0, 1] as const) {
    const [command, args] = inHost(host, ['tc', 'qdisc', 'replace', 'dev', pair.links[host], 'root', 'tbf']);
    execFileSync(command, [...args, 'rate', rate, 'burst', String(burst), 'latency', '100ms']);
  }
}

function transmittedBytes(host: 0 | 1): number {
  const [command, args] = inHost(host, ['cat', `/sys/class/net/${pair.links[host]}/statistics/tx_bytes`]);
  return Number(execFileSync(command, args, { encoding: 'utf8' }));
}

interface Launch {
  code: number | null;
  stdout: string;
  stderr: string;
}

function launch(host: 0 | 1, argv: string[], env: NodeJS.ProcessEnv = {}): Promise<Launch> {
  const [command, args] = inHost(host, argv);
  const child = spawn(command, args, {
    env: { ...process.env, FSDP_JOB_SECRET: secret, OPENBLAS_NUM_THREADS: '1', OMP_NUM_THREADS: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const limit = setTimeout(() => child.kill('SIGKILL'), 900_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(limit);
      resolve({ code, stdout, stderr });
    }),
  );
}

/** Waits for a launch on each host; when one fails, ends what still runs on both (its peer would wait). */
async function both(launches: [Promise<Launch>, Promise<Launch>], what: string): Promise<Launch[]> {
  const stopPeers = (result: Launch) => {
    if (result.code !== 0)
      for (const host of [0, 1] as const)
        for (const pid of pair.pids(host))
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // already gone
          }
    return result;
  };
  const done = await Promise.all(launches.map((item) => item.then(stopPeers)));
  if (done.some((item) => item.code !== 0))
    throw new Error(
      `${what} failed:\n${done.map((item) => `${item.stdout}\n${item.stderr}`).join('\n---\n')}`,
    );
  return done;
}

/** The shaped link's raw TCP rate per direction, both directions at once, in bytes per second. */
async function probeLink(rate: string): Promise<number> {
  const bitsPerSecond =
    Number.parseFloat(rate) * ({ k: 1e3, m: 1e6, g: 1e9 }[/[kmg]/.exec(rate)?.[0] ?? 'm'] ?? 1e6);
  const bytes = Math.round(Math.min(bitsPerSecond / 8, 1e9) * 1.5);
  const port = String(portCounter++);
  const node = [process.execPath, '--import', 'tsx', rawProbe];
  const server = launch(1, [...node, 'serve', pair.addresses[1], port, String(bytes)]);
  const client = launch(0, [...node, 'connect', pair.addresses[1], port, String(bytes)]);
  const done = await both([client, server], 'raw-socket probe');
  const rates = done.map(
    (item) =>
      (JSON.parse(item.stdout.trim().split('\n').at(-1)!) as { bytesPerSecond: number }).bytesPerSecond,
  );
  return Math.min(...rates);
}

async function runOurs(
  setting: SettingName,
): Promise<{ results: Map<string, RunResult>; wireBytes: number }> {
  const requests: RunRequest[] = [
    { kind: 'two-singles', name: 'compute' },
    ...ourRows.map((row) => ({ kind: row.kind, name: row.name, bfloat16: row.bfloat16 })),
  ].map((row, index) => ({
    kind: row.kind as RunRequest['kind'],
    config: { ...config, seqLen: settings[setting].seqLen },
    ...settings[setting],
    ...('bfloat16' in row && row.bfloat16
      ? { mixedPrecision: { paramDtype: 'bfloat16' as const, reduceDtype: 'bfloat16' as const } }
      : {}),
    output: join(scratch, `${row.name.replace(/\W+/g, '-')}-${index}-${portCounter}.json`),
  }));
  const port = String(portCounter++);
  const flags = (node: number) => [
    ...['--nnodes', '2', '--node-rank', String(node), '--nproc-per-node', '1'],
    ...['--master-addr', pair.addresses[0], '--master-port', port, '--timeout', '600'],
  ];
  const node = [process.execPath, '--conditions=@fsdp-ts/source', '--import', 'tsx', launcher];
  const before = transmittedBytes(0) + transmittedBytes(1);
  await both(
    [
      launch(0, [...node, ...flags(0), rankScript, JSON.stringify(requests)]),
      launch(1, [...node, ...flags(1), rankScript, JSON.stringify(requests)]),
    ],
    `fsdp-ts rows (${setting})`,
  );
  const wireBytes = transmittedBytes(0) + transmittedBytes(1) - before;
  const names = ['compute', ...ourRows.map((row) => row.name)];
  const results = new Map(
    requests.map((request, index) => [
      names[index]!,
      JSON.parse(readFileSync(request.output, 'utf8')) as RunResult,
    ]),
  );
  return { results, wireBytes };
}

async function runTorch(
  mode: 'fsdp' | 'ddp',
  setting: SettingName,
): Promise<{ stepMs: number[]; wireBytes: number }> {
  const request = { mode, worldSize: 2, ...config, ...settings[setting] };
  const env = (rank: 0 | 1) => ({
    // gloo binds the address the hostname resolves to (127.0.0.1) unless told the interface.
    GLOO_SOCKET_IFNAME: pair.links[rank],
    BENCH_TORCH_RANK: String(rank),
    MASTER_ADDR: pair.addresses[0],
    MASTER_PORT: String(portCounter),
  });
  portCounter++;
  const before = transmittedBytes(0) + transmittedBytes(1);
  const done = await both(
    [
      launch(0, [python, torchScript, JSON.stringify(request)], env(0)),
      launch(1, [python, torchScript, JSON.stringify(request)], env(1)),
    ],
    `PyTorch ${mode}`,
  );
  const wireBytes = transmittedBytes(0) + transmittedBytes(1) - before;
  const line = done[0]!.stdout.trim().split('\n').at(-1)!;
  return { stepMs: (JSON.parse(line) as { stepMs: number[] }).stepMs, wireBytes };
}

interface CaseResult {
  rate: string;
  setting: SettingName;
  busy: boolean;
  batch: number;
  seqLen: number;
  parameters: number;
  linkBytesPerSecond: number[];
  computeStepMs: number[];
  rows: Record<string, { stepMs: number[]; wireBytes: number[]; steps: number }>;
}

function startBusy(): ChildProcess[] {
  // One process spinning on each host, as another job would: the same load for both sides.
  return ([0, 1] as const).map((host) => {
    const [command, args] = inHost(host, [process.execPath, '-e', 'for (;;) {}']);
    return spawn(command, args, { stdio: 'ignore' });
  });
}

const caseResults: CaseResult[] = cases.map((item) => ({
  ...item,
  batch: settings[item.setting].batch,
  seqLen: settings[item.setting].seqLen,
  parameters: 0,
  linkBytesPerSecond: [],
  computeStepMs: [],
  rows: {},
}));

try {
  for (let round = 0; round < rounds; round++) {
    for (const result of caseResults) {
      shape(result.rate);
      const busy = result.busy ? startBusy() : [];
      result.linkBytesPerSecond.push(await probeLink(result.rate));
      const steps = settings[result.setting].warmupSteps + settings[result.setting].measuredSteps;
      const record = (name: string, stepMs: number[], wireBytes: number) => {
        result.rows[name] ??= { stepMs: [], wireBytes: [], steps };
        const row = result.rows[name];
        row.stepMs.push(...stepMs);
        row.wireBytes.push(wireBytes);
      };
      // Rotated each round: ours, PyTorch FSDP, PyTorch DDP; then FSDP, DDP, ours; ...
      const order = [0, 1, 2].map((index) => (index + round) % 3);
      for (const which of order) {
        if (which === 0) {
          const { results, wireBytes } = await runOurs(result.setting);
          for (const [name, run] of results) {
            result.parameters = run.parameters;
            if (name === 'compute') result.computeStepMs.push(...run.stepSamples);
            // One launch carries every row: its bytes are shared out by each row's model share.
            else record(name, run.stepSamples, wireBytes);
          }
        } else {
          const torch = torchRows[which - 1]!;
          const { stepMs, wireBytes } = await runTorch(torch.mode, result.setting);
          record(torch.name, stepMs, wireBytes);
        }
      }
      for (const spinner of busy) spinner.kill('SIGKILL');
      process.stderr.write(
        `round ${round + 1}/${rounds}: ${result.rate} ${result.setting}${result.busy ? ' + busy process' : ''} done\n`,
      );
    }
  }
} finally {
  pair.remove();
  rmSync(scratch, { recursive: true, force: true });
}

/** A row as bench:report and the console show it. */
function summarise(result: CaseResult) {
  const tokensPerStep = 2 * result.batch * result.seqLen;
  const compute = spread(result.computeStepMs).median;
  const link = spread(result.linkBytesPerSecond).median;
  const oursLaunchPredicted = ourRows.reduce((sum, row) => sum + wireBytesPerParameter(row.name), 0);
  return Object.entries(result.rows).map(([name, row]) => {
    const step: Spread = spread(row.stepMs);
    const predictedPerStep = 2 * wireBytesPerParameter(name) * result.parameters; // both ranks send
    // Our rows share one launch: its counted bytes are split by each row's predicted share.
    const share = name.startsWith('fsdp-ts') ? wireBytesPerParameter(name) / oursLaunchPredicted : 1;
    const countedPerStep = (spread(row.wireBytes).median * share) / row.steps;
    const wireMs = ((predictedPerStep / 2) * 1000) / link; // each direction carries one rank's share
    const boundMs = Math.max(compute, wireMs);
    return {
      name,
      tokensPerSecond: {
        min: tokensPerStep / (step.max / 1000),
        median: tokensPerStep / (step.median / 1000),
        max: tokensPerStep / (step.min / 1000),
      },
      stepMs: step,
      exposedCommunicationMs: step.median - compute,
      predictedWireBytesPerStep: predictedPerStep,
      countedWireBytesPerStep: countedPerStep,
      boundStepMs: boundMs,
      ofBound: boundMs / step.median,
    };
  });
}

const summaries = caseResults.map((result) => ({
  rate: result.rate,
  setting: result.setting,
  busy: result.busy,
  batch: result.batch,
  seqLen: result.seqLen,
  parameters: result.parameters,
  linkBytesPerSecond: spread(result.linkBytesPerSecond),
  computeStepMs: spread(result.computeStepMs),
  rows: summarise(result),
}));

for (const summary of summaries) {
  console.log(
    `\n${summary.rate}, batch ${summary.batch} × ${summary.seqLen} per rank${summary.busy ? ', one busy process per host' : ''}: link ${(summary.linkBytesPerSecond.median / 1e6).toFixed(1)} MB/s per direction, compute ${summary.computeStepMs.median.toFixed(0)} ms/step`,
  );
  console.log('| row | tokens/s | step ms | exposed comm ms | wire MB/step (model / counted) | of bound |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const row of summary.rows)
    console.log(
      `| ${row.name} | ${row.tokensPerSecond.median.toFixed(0)} (${row.tokensPerSecond.min.toFixed(0)}–${row.tokensPerSecond.max.toFixed(0)}) | ${row.stepMs.median.toFixed(0)} | ${row.exposedCommunicationMs.toFixed(0)} | ${(row.predictedWireBytesPerStep / 1e6).toFixed(1)} / ${(row.countedWireBytesPerStep / 1e6).toFixed(1)} | ${(100 * row.ofBound).toFixed(0)}% |`,
    );
}
mkdirSync(dirname(output), { recursive: true });
writeFileSync(
  output,
  `${JSON.stringify({ benchmark: 'cluster', context: benchmarkRun.finish(), rounds, settings, config, cases: summaries }, null, 2)}\n`,
);
process.stderr.write(`wrote ${output}\n`);
