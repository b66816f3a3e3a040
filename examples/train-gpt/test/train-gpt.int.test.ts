import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { typescriptScriptArguments } from '../../../packages/collectives/test/helpers/rank-commands';
import type { RunSummary } from '../src/metrics';

const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));

/** Runs the demo's main.ts; `log` is stdout and stderr as they came, `stdout` what it printed. */
function run(args: string[]): Promise<{ code: number | null; log: string; stdout: string }> {
  const child = spawn(process.execPath, [...typescriptScriptArguments(), main, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => {
    log += chunk.toString();
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    log += chunk.toString();
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, log, stdout })));
}

/**
 * The example README's "A short run" section: the `npm run demo -- …` command of its ```sh block
 * and the program's output quoted in the ```text block after it.
 */
function readmeDemo(): { args: string[]; quoted: string } {
  const readme = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');
  const section = readme.split(/^## /m).find((part) => part.startsWith('A short run\n')) ?? '';
  const match = /```sh\nnpm run demo -- (.+)\n```\n+```text\n([\s\S]*?)```/.exec(section);
  if (match === null)
    throw new Error(
      "examples/train-gpt/README.md's 'A short run' section has no ```sh npm run demo -- … block followed by a ```text block",
    );
  return { args: match[1]!.trim().split(/\s+/), quoted: match[2]! };
}

/** `args` with `flag`'s value replaced (or the flag added). */
function withOption(args: readonly string[], flag: string, value: string): string[] {
  const index = args.indexOf(flag);
  return index === -1 ? [...args, flag, value] : args.map((arg, at) => (at === index + 1 ? value : arg));
}

/** What may differ between two runs of the same command: timings, and where the outputs went. */
function withoutTimings(output: string): string[] {
  return output
    .trimEnd()
    .split('\n')
    .map((line) =>
      line
        .replace(/· \d+ tok\/s ·/, '· … tok/s ·')
        .replace(/ETA (\d+:\d\d|--:--)$/, 'ETA …')
        .replace(/^finished in \d+:\d\d$/, 'finished in …')
        .replace(
          /^report: \S+\/report\.html {2}plot: \S+\/curves\.svg$/,
          'report: …/report.html  plot: …/curves.svg',
        ),
    );
}

// The example README's short demo (a tiny model, 20 steps) on 2 real processes through fsdp-run (tcp):
// its output must be the README's quoted block, timings aside; a second run must give the same
// numbers bit for bit (see "A short run" in the example README); then a restart with --steps 30 resumes
// from the step-20 checkpoint and trains 10 more.
it('prints what the README quotes, deterministically, resumes from its checkpoint, writes the plot and report', async () => {
  const demo = readmeDemo();
  const out = mkdtempSync(join(tmpdir(), 'train-gpt-'));
  const again = mkdtempSync(join(tmpdir(), 'train-gpt-again-'));
  const first = await run(withOption(demo.args, '--out', out));
  expect(first.code, first.log).toBe(0);
  expect(withoutTimings(first.stdout)).toEqual(withoutTimings(demo.quoted));
  const firstSummary = JSON.parse(readFileSync(join(out, 'metrics.json'), 'utf8')) as RunSummary;
  expect(existsSync(join(out, 'checkpoints'))).toBe(true);
  // The repeat and the resumed run write to different directories, so they run side by side.
  const [repeated, second] = await Promise.all([
    run(withOption(demo.args, '--out', again)),
    run(withOption(withOption(demo.args, '--out', out), '--steps', '30')),
  ]);
  expect(repeated.code, repeated.log).toBe(0);
  const numbers = (summary: RunSummary) => ({
    steps: summary.steps.map(({ step, loss, lr }) => ({ step, loss, lr })),
    evaluations: summary.evaluations,
    samples: summary.samples,
  });
  const repeatedSummary = JSON.parse(readFileSync(join(again, 'metrics.json'), 'utf8')) as RunSummary;
  expect(numbers(repeatedSummary)).toEqual(numbers(firstSummary));

  expect(second.code, second.log).toBe(0);
  expect(second.log).toContain('(step 20)');
  const summary = JSON.parse(readFileSync(join(out, 'metrics.json'), 'utf8')) as RunSummary;
  expect(summary.worldSize).toBe(2);
  expect(summary.steps.map((step) => step.step)).toEqual(Array.from({ length: 30 }, (_, index) => index + 1));
  expect(summary.steps.slice(0, 20)).toEqual(firstSummary.steps);
  const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
  const losses = summary.steps.map((step) => step.loss);
  // Chance level of the answer digits is about 1.8 nats; 30 AdamW steps bring the mean of the
  // last five steps clearly below the mean of the first five.
  expect(mean(losses.slice(-5))).toBeLessThan(mean(losses.slice(0, 5)) - 0.2);
  expect(summary.evaluations.map((evaluation) => evaluation.step)).toEqual([0, 10, 20, 30]);
  expect(summary.samples.length).toBeGreaterThan(0);
  const svg = readFileSync(join(out, 'curves.svg'), 'utf8');
  expect(svg).toMatch(/^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  expect(svg).toContain('<polyline');
  expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('curves.svg');
  expect(second.log).toContain('done: loss');
});

// The same short demo with its ranks started by mpirun (the mpi backend, Open MPI): at W=2 every
// sum has two terms, so its output is the README's block too, number for number.
it('runs under mpirun (--launcher mpirun) and prints what the README quotes', async () => {
  const demo = readmeDemo();
  const out = mkdtempSync(join(tmpdir(), 'train-gpt-mpi-'));
  const result = await run(withOption(withOption(demo.args, '--out', out), '--launcher', 'mpirun'));
  expect(result.code, result.log).toBe(0);
  expect(withoutTimings(result.stdout)).toEqual(withoutTimings(demo.quoted));
  const summary = JSON.parse(readFileSync(join(out, 'metrics.json'), 'utf8')) as RunSummary;
  expect(summary.worldSize).toBe(2);
});

it('rejects an invalid flag before starting any process', async () => {
  const { code, log } = await run(['--strategy', 'zero-4']);
  expect(code).not.toBe(0);
  expect(log).toContain('zero-4');
});
