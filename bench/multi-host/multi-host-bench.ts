/**
 * Multi-host benchmark (not a test; needs root for `ip netns`):
 *   node --conditions=@fsdp-ts/source --import tsx bench/multi-host/multi-host-bench.ts
 * Runs bench-rank.ts three ways, each with fsdp-run:
 *   veth      2 namespace hosts x 1 process, joined by a veth pair (10.231.1.1 <-> 10.231.1.2)
 *   loopback  1 namespace host x 2 processes on 127.0.0.1
 * and prints bus bandwidth (1 MiB and 16 MiB float32) and training tokens/s (small GPT, FSDP
 * full-shard, wasm) side by side; writes bench-results/multi-host.json.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createNamespacePair } from '../../packages/fsdp/test/multi-host-netns';
import { startRun } from '../internal/run-context';
import type { Spread } from './bench-rank';

const benchmarkRun = startRun();
const root = fileURLToPath(new URL('../..', import.meta.url));
const launcher = join(
  dirname(
    createRequire(join(root, 'packages/fsdp/package.json')).resolve('@fsdp-ts/collectives/package.json'),
  ),
  'src/bin/fsdp-run.ts',
);
const rankScript = fileURLToPath(new URL('./bench-rank.ts', import.meta.url));
const secret = randomBytes(32).toString('hex');

interface RankResult {
  bandwidth: Record<string, Spread>;
  tokensPerSecond: Spread;
}

function run(namespace: string, args: string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn(
    'ip',
    [
      'netns',
      'exec',
      namespace,
      process.execPath,
      '--conditions=@fsdp-ts/source',
      '--import',
      'tsx',
      launcher,
      ...args,
      rankScript,
    ],
    { env: { ...process.env, FSDP_JOB_SECRET: secret }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const limit = setTimeout(() => child.kill('SIGKILL'), 600_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(limit);
      resolve({ code, output });
    }),
  );
}

function resultOf(outputs: string[]): RankResult {
  for (const output of outputs) {
    const match = /^\[rank 0\] RESULT (.*)$/m.exec(output);
    if (match !== null) return JSON.parse(match[1]!) as RankResult;
  }
  throw new Error(`no RESULT line:\n${outputs.join('\n')}`);
}

const pair = createNamespacePair({ stem: 'fsdp-mhb', prefix: '10.231.1' });
const results: Record<string, RankResult> = {};
try {
  const [host0, host1] = pair.namespaces;
  const multi = (node: number) => [
    ...['--nnodes', '2', '--node-rank', String(node), '--nproc-per-node', '1'],
    ...['--master-addr', pair.addresses[0], '--master-port', '29600', '--timeout', '300'],
  ];
  const veth = await Promise.all([run(host0, multi(0)), run(host1, multi(1))]);
  if (veth.some((launch) => launch.code !== 0))
    throw new Error(veth.map((launch) => launch.output).join('\n'));
  results['veth: 2 hosts x 1 process'] = resultOf(veth.map((launch) => launch.output));
  const loopback = await run(host0, ['--nproc-per-node', '2']);
  if (loopback.code !== 0) throw new Error(loopback.output);
  results['loopback: 1 host x 2 processes'] = resultOf([loopback.output]);
} finally {
  pair.remove();
}

const format = (spread: Spread, digits: number) =>
  `${spread.median.toFixed(digits)} (${spread.min.toFixed(digits)}-${spread.max.toFixed(digits)})`;
const names = Object.keys(results);
const metrics = Object.keys(results[names[0]!]!.bandwidth);
const header = ['metric (median (min-max))', ...names];
const rows = [
  ...metrics.map((metric) => [
    `${metric} busbw GB/s`,
    ...names.map((name) => format(results[name]!.bandwidth[metric]!, 3)),
  ]),
  ['training tokens/s', ...names.map((name) => format(results[name]!.tokensPerSecond, 0))],
];
const widths = header.map((_, column) => Math.max(...[header, ...rows].map((row) => row[column]!.length)));
for (const row of [header, widths.map((width) => '-'.repeat(width)), ...rows]) {
  console.log(`| ${row.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')} |`);
}
const load = loadavg();
console.log(
  `(${cpus().length} cores, load average ${load.map((value) => value.toFixed(1)).join(' ')}: shared with other agents, noisy)`,
);
mkdirSync(join(root, 'bench-results'), { recursive: true });
writeFileSync(
  join(root, 'bench-results/multi-host.json'),
  `${JSON.stringify({ date: new Date().toISOString(), context: benchmarkRun.finish(), cores: cpus().length, loadAverage: load, results }, null, 2)}\n`,
);
