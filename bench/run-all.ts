/**
 * `npm run bench`: every package's benchmark, then the FSDP end-to-end benchmark (which includes the
 * seed table), within a time budget. Writes bench-results/<date>.json and bench-results/<date>.md
 * (the summary: each benchmark's figures as median (min–max), the seed table for both settings and
 * the targets). Each package benchmark also writes its own bench-results/<name>.json, which
 * `npm run bench:report -- --collect` copies into bench/results/ and renders as bench/RESULTS.md.
 *   npm run bench -- --full   longer FSDP runs (more measured steps; beyond the 15-minute budget here)
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { seedTable } from './seed-table';
import { summariseFigures } from './summarise-figures';

const root = fileURLToPath(new URL('../', import.meta.url));
const results = join(root, 'bench-results');
mkdirSync(results, { recursive: true });

interface BenchmarkRun {
  workspace: string;
  seconds: number;
  exitCode: number | null;
  files: string[];
  outputTail: string;
}

/** Package benchmarks, cheapest first; the FSDP one runs last with its own share of the budget. */
const packageBenchmarks = [
  '@fsdp-ts/tensor',
  '@fsdp-ts/flat-param',
  '@fsdp-ts/optim',
  '@fsdp-ts/collectives',
  '@fsdp-ts/nn',
];
const perBenchmarkTimeoutSeconds = 180;
const fsdpTimeoutSeconds = 900;

function jsonFiles(): Map<string, number> {
  return new Map(
    readdirSync(results)
      .filter((name) => name.endsWith('.json'))
      .map((name) => [name, statSync(join(results, name)).mtimeMs]),
  );
}

function runBenchmark(workspace: string, timeoutSeconds: number, env: NodeJS.ProcessEnv = {}): BenchmarkRun {
  const before = jsonFiles();
  const started = performance.now();
  process.stderr.write(`▶ ${workspace} (at most ${timeoutSeconds} s)\n`);
  const child = spawnSync('npm', ['run', 'bench', '-w', workspace], {
    cwd: root,
    encoding: 'utf8',
    timeout: timeoutSeconds * 1000,
    env: { ...process.env, ...env },
    maxBuffer: 64 * 1024 * 1024,
  });
  const seconds = (performance.now() - started) / 1000;
  const files = [...jsonFiles()].filter(([name, mtime]) => before.get(name) !== mtime).map(([name]) => name);
  const output = `${child.stdout ?? ''}${child.stderr ?? ''}`;
  process.stderr.write(
    `  ${child.status === 0 ? 'done' : `FAILED (exit ${child.status ?? child.signal})`} in ${seconds.toFixed(0)} s; wrote ${files.join(', ') || 'nothing'}\n`,
  );
  return { workspace, seconds, exitCode: child.status, files, outputTail: output.slice(-4000) };
}

const started = performance.now();
const runs: BenchmarkRun[] = [];
for (const workspace of packageBenchmarks) runs.push(runBenchmark(workspace, perBenchmarkTimeoutSeconds));
runs.push(
  runBenchmark(
    '@fsdp-ts/fsdp',
    fsdpTimeoutSeconds,
    process.argv.includes('--full') ? {} : { BENCH_QUICK: '1' },
  ),
);
const totalSeconds = (performance.now() - started) / 1000;

const date = new Date().toISOString();
const stamp = date.replace(/[:.]/g, '-');
const collected: Record<string, unknown> = {};
for (const run of runs)
  for (const file of run.files) collected[file] = JSON.parse(readFileSync(join(results, file), 'utf8'));
const machine = {
  cpus: `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown'}`,
  memoryGiB: Number((os.totalmem() / 2 ** 30).toFixed(1)),
  node: process.version,
  loadAverageAtEnd: os.loadavg(),
  note: 'shared machine: other agents were running builds and tests; medians with min–max show the noise',
};
writeFileSync(
  join(results, `${stamp}.json`),
  `${JSON.stringify({ date, machine, totalSeconds, runs: runs.map(({ outputTail, ...run }) => run), results: collected }, null, 2)}\n`,
);

const lines = [
  `# Benchmarks, ${date}`,
  '',
  `Machine: ${machine.cpus}, ${machine.memoryGiB} GiB, Node ${machine.node}; load average at the end ${machine.loadAverageAtEnd.map((value) => value.toFixed(1)).join(' ')}. ${machine.note}.`,
  `Total time ${totalSeconds.toFixed(0)} s.`,
  '',
  '| benchmark | result | seconds | files |',
  '| --- | --- | --- | --- |',
  ...runs.map(
    (run) =>
      `| ${run.workspace} | ${run.exitCode === 0 ? 'ok' : 'FAILED'} | ${run.seconds.toFixed(0)} | ${run.files.join(', ')} |`,
  ),
];
const fsdp = collected['fsdp-training.json'];
if (fsdp !== undefined) lines.push('', ...seedTable(fsdp as Parameters<typeof seedTable>[0]));
for (const [file, content] of Object.entries(collected)) {
  if (file === 'fsdp-training.json') continue;
  lines.push('', `## ${file}`, '', ...summariseFigures(content));
}
for (const run of runs.filter((entry) => entry.exitCode !== 0)) {
  lines.push('', `## ${run.workspace} failed`, '', '```', run.outputTail.trim(), '```');
}
const markdown = `${lines.join('\n')}\n`;
writeFileSync(join(results, `${stamp}.md`), markdown);
process.stdout.write(markdown);
process.stderr.write(
  `wrote bench-results/${stamp}.json and bench-results/${stamp}.md; npm run bench:report -- --collect takes each benchmark's JSON into bench/results/ and renders bench/RESULTS.md\n`,
);
if (!existsSync(join(results, 'fsdp-training.json')) || runs.some((run) => run.exitCode !== 0))
  process.exitCode = 1;
