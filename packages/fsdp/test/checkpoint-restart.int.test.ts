import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { listCheckpoints } from '@fsdp-ts/fsdp';
import { afterAll, describe, expect, it } from 'vitest';
import { fsdpRunArguments } from '../../collectives/test/helpers/rank-commands';

const script = fileURLToPath(new URL('./fixtures/checkpoint-restart-script.ts', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'fsdp-restart-test-'));

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

interface Job {
  code: number | null;
  stdout: string;
  stderr: string;
  root: string;
  output: string;
}

/** fsdp-run (from source) with 2 processes and one restart allowed, running the restart script. */
function runJob(name: string, kill?: number): Promise<Job> {
  const root = join(work, name, 'checkpoints');
  const output = join(work, name, 'output');
  mkdirSync(output, { recursive: true });
  const args = [...fsdpRunArguments(), '--nproc-per-node', '2'];
  args.push('--max-restarts', '1', '--grace-period', '2', script, root, output);
  if (kill !== undefined) args.push(String(kill));
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 170_000);
  return new Promise((resolve) => {
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, root, output });
    });
  });
}

function rankResult(job: Job, rank: number) {
  return JSON.parse(readFileSync(join(job.output, `rank-${rank}.json`), 'utf8')) as {
    startStep: number;
    attempt: number;
    pieces: Record<string, { offset: number; values: number[] }>;
  };
}

describe('restart after a crash with fsdp-run --max-restarts 1 (real processes, W=2)', () => {
  it('a worker SIGKILLed after step 7 of 20 resumes from step 5 and ends bitwise equal to an uninterrupted run', async () => {
    const [crashed, clean] = await Promise.all([runJob('crashed', 7), runJob('clean')]);
    expect(crashed.code, `${crashed.stdout}\n${crashed.stderr}`).toBe(0);
    expect(clean.code, `${clean.stdout}\n${clean.stderr}`).toBe(0);
    for (const rank of [0, 1]) {
      const resumed = rankResult(crashed, rank);
      const reference = rankResult(clean, rank);
      expect(resumed.attempt).toBe(1);
      expect(resumed.startStep).toBe(5);
      expect(reference.attempt).toBe(0);
      expect(reference.startStep).toBe(0);
      expect(resumed.pieces).toEqual(reference.pieces);
    }
    expect(listCheckpoints(crashed.root).map((entry) => entry.step)).toEqual([15, 20]);
  }, 180_000);
});
