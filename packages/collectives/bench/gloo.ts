import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** PyTorch gloo all-reduce timings from bench/gloo-all-reduce.py (rank 0's, ms per op). */
export interface GlooRow {
  bytes: number;
  ms: number[];
  /** Rank 0's process CPU per timed op (every thread, its barrier included), ms. */
  cpuMs?: number;
}

const PYTHON = '/usr/bin/python3';
const script = fileURLToPath(new URL('./gloo-all-reduce.py', import.meta.url));

/** Why gloo cannot run here, or undefined when /usr/bin/python3 imports torch with gloo. */
export function glooUnavailable(): string | undefined {
  if (!existsSync(PYTHON)) return `${PYTHON} is missing`;
  const probe = spawnSync(PYTHON, ['-c', 'import torch.distributed as d; assert d.is_gloo_available()'], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  return probe.status === 0
    ? undefined
    : `${PYTHON} cannot import torch with gloo (${probe.stderr.trim().split('\n').at(-1)})`;
}

/**
 * Runs the gloo float32 all-reduce sweep on `worldSize` local processes: `opsByVolume(iterations,
 * timedBytes, size)` timed ops per size after `opsByVolume(warmup, warmupBytes, size)` untimed
 * ones ([Note: warm-up by volume]).
 */
export function runGloo(
  worldSize: number,
  sizes: number[],
  iterations: number,
  warmup: number,
  warmupBytes = 0,
  timedBytes = 0,
): GlooRow[] {
  const run = spawnSync(
    PYTHON,
    [script, String(worldSize), String(iterations), String(warmup), ...sizes.map(String)],
    {
      encoding: 'utf8',
      timeout: 900_000,
      env: {
        ...process.env,
        OMP_NUM_THREADS: '1',
        WARMUP_BYTES: String(warmupBytes),
        TIMED_BYTES: String(timedBytes),
      },
    },
  );
  if (run.status !== 0) throw new Error(`gloo benchmark failed (${run.status}):\n${run.stderr}`);
  const line = run.stdout.trim().split('\n').at(-1) ?? '';
  return (JSON.parse(line) as { rows: GlooRow[] }).rows;
}
