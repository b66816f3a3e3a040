import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import type { RunSummary } from '../src/metrics';

const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));

function run(args: string[]): Promise<{ code: number | null; log: string }> {
  const child = spawn(process.execPath, ['--conditions=@fsdp-ts/source', '--import', 'tsx', main, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout.on('data', (chunk: Buffer) => {
    log += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    log += chunk.toString();
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, log })));
}

// The demo reduced to a tiny model, on 2 real processes through fsdp-run (tcp): 20 steps, then a
// restart with --steps 30 that resumes from the step-20 checkpoint and trains 10 more.
it('trains with FSDP across 2 processes, resumes from its checkpoint, writes the plot and report', async () => {
  const out = mkdtempSync(join(tmpdir(), 'train-gpt-'));
  const common = [
    '--batch',
    '16',
    '--d-model',
    '32',
    '--layers',
    '2',
    '--heads',
    '2',
    '--eval-every',
    '10',
    '--warmup',
    '5',
    '--progress',
    'lines',
    '--out',
    out,
  ];
  const first = await run(['--steps', '20', ...common]);
  expect(first.code, first.log).toBe(0);
  expect(existsSync(join(out, 'checkpoints'))).toBe(true);
  const second = await run(['--steps', '30', ...common]);
  expect(second.code, second.log).toBe(0);
  expect(second.log).toContain('(step 20)');
  const summary = JSON.parse(readFileSync(join(out, 'metrics.json'), 'utf8')) as RunSummary;
  expect(summary.worldSize).toBe(2);
  expect(summary.steps.map((step) => step.step)).toEqual(Array.from({ length: 30 }, (_, index) => index + 1));
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

it('rejects an invalid flag before starting any process', async () => {
  const { code, log } = await run(['--strategy', 'zero-4']);
  expect(code).not.toBe(0);
  expect(log).toContain('zero-4');
});
