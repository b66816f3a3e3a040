import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { typescriptScriptArguments } from '../../../packages/collectives/test/helpers/rank-commands';

const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));

interface Comparison {
  sameObjects: boolean;
  frozenUntouched: boolean;
  worst: number;
  matches: boolean;
  wrapped: { loss: number; norms: number[] }[];
  unwrapped: { loss: number; norms: number[] }[];
}

// The example itself, reduced to 3 steps, on 2 real processes through fsdp-run (tcp on loopback).
it('matches every group of the unwrapped run across 2 processes', async () => {
  const out = join(mkdtempSync(join(tmpdir(), 'param-groups-')), 'comparison.json');
  const child = spawn(
    process.execPath,
    [...typescriptScriptArguments(), main, '--steps', '3', '--out', out],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
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
  const comparison = JSON.parse(readFileSync(out, 'utf8')) as Comparison;
  expect(comparison.sameObjects).toBe(true);
  expect(comparison.frozenUntouched).toBe(true);
  expect(comparison.wrapped).toHaveLength(3);
  // The stated tolerance of the example: 1e-4 relative on losses and update norms.
  expect(comparison.worst).toBeLessThanOrEqual(1e-4);
  // Each trained group moved (a group left out of its optimizer would show 0).
  for (const row of comparison.wrapped)
    for (const norm of row.norms.slice(0, 3)) expect(norm).toBeGreaterThan(0);
  expect(log).toContain('OK: every group matches the unwrapped run.');
});
