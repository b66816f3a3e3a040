/**
 * [Note: no launcher] in src/internal/no-launcher-notice.ts: a script started without a launcher
 * says, in one stderr line, that it runs as a single process and how to start N; under fsdp-run
 * or with an explicit rank and size it says nothing.
 */
import { spawn } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { bundleLauncher, fixture, launch, packageRoot } from './launcher-harness.js';

const script = fixture('no-launcher-rank.ts');
const LAUNCHER_VARIABLES = [
  'RANK',
  'WORLD_SIZE',
  'LOCAL_RANK',
  'LOCAL_WORLD_SIZE',
  'MASTER_ADDR',
  'MASTER_PORT',
  'SLURM_PROCID',
  'SLURM_NTASKS',
];

/** `node --import tsx no-launcher-rank.ts <mode>` from the package root, as `npx tsx` would run it (workspace packages from source). */
function runAlone(mode: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = { ...process.env };
  for (const name of LAUNCHER_VARIABLES) delete env[name];
  const child = spawn(process.execPath, ['--conditions=@fsdp-ts/source', '--import', 'tsx', script, mode], {
    cwd: packageRoot,
    env,
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
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

describe('initProcessGroup without a launcher', () => {
  beforeAll(async () => {
    await bundleLauncher();
  });

  it('prints exactly one stderr line saying it runs as one process and how to start N, then runs as rank 0 of 1', async () => {
    const run = await runAlone('plain');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toBe(
      'fsdp-ts: no launcher (RANK and WORLD_SIZE are not set), so this runs as a single process (rank 0 of 1); to start N processes: npx fsdp-run --nproc-per-node N test/fixtures/no-launcher-rank.ts\n',
    );
    expect(run.stdout).toBe('RESULT {"rank":0,"size":1,"value":3}\n');
  }, 60_000);

  it('says nothing with an explicit rank and size, or under fsdp-run', async () => {
    const [explicit, launched] = await Promise.all([
      runAlone('explicit'),
      (async () => {
        const job = launch(['--nproc-per-node', '2', script, 'plain']);
        const { code } = await job.exited;
        return { code, stdout: job.stdout(), stderr: job.stderr() };
      })(),
    ]);
    expect(explicit.code, explicit.stderr).toBe(0);
    expect(explicit.stderr).toBe('');
    expect(explicit.stdout).toBe('RESULT {"rank":0,"size":1,"value":3}\n');
    expect(launched.code, launched.stderr).toBe(0);
    expect(launched.stderr).not.toMatch(/no launcher/);
    expect(launched.stdout).toMatch(/^\[rank 0\] RESULT \{"rank":0,"size":2,"value":6\}$/m);
    expect(launched.stdout).toMatch(/^\[rank 1\] RESULT \{"rank":1,"size":2,"value":6\}$/m);
  }, 60_000);
});
