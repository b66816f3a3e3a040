import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { typescriptScriptArguments } from '../../../packages/collectives/test/helpers/rank-commands';
import type { RunResult } from '../src/train';

const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));

// The example itself, reduced to one short epoch: single-process model.fit, then 2 real processes
// through fsdp-run (tcp on loopback) running ShardedTrainer.
it('trains the CNN with model.fit and with ShardedTrainer on 2 processes and prints both', async () => {
  const resultFile = join(mkdtempSync(join(tmpdir(), 'layers-mnist-like-test-')), 'results.json');
  const child = spawn(
    process.execPath,
    [
      ...typescriptScriptArguments(),
      main,
      '--samples',
      '128',
      '--validation',
      '64',
      '--epochs',
      '1',
      '--batch-size',
      '32',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LAYERS_EXAMPLE_RESULT: resultFile } },
  );
  let log = '';
  child.stdout.on('data', (chunk: Buffer) => {
    log += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    log += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  expect(code, log).toBe(0);
  const results = JSON.parse(readFileSync(resultFile, 'utf8')) as RunResult[];
  expect(results.map((result) => result.worldSize)).toEqual([1, 2]);
  for (const result of results) {
    expect(result.valAccuracy).toBeGreaterThanOrEqual(0);
    expect(result.valAccuracy).toBeLessThanOrEqual(1);
    expect(Number.isFinite(result.valLoss)).toBe(true);
    expect(result.samplesPerSecond).toBeGreaterThan(0);
  }
  // Progress comes from rank 0 only: one line for the one epoch.
  expect(log.match(/Epoch 1\/1 · /g)).toHaveLength(1);
  expect(log).toContain('| ShardedTrainer shard-gradients (2 processes) |');
});
