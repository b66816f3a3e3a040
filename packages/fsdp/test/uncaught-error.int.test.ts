/**
 * An error nobody catches in a worker on the wasm backend: the process prints the project's error
 * (name, message with its fix, code) and exits with code 1, not Emscripten's rethrow (code 7, a
 * stack starting in tfjs-backend-wasm); fsdp-run reports it once for the rank that threw.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { fsdpRunArguments, typescriptScriptArguments } from '../../collectives/test/helpers/rank-commands';

const script = fileURLToPath(new URL('./fixtures/uncaught-error-script.ts', import.meta.url));

function run(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, FSDP_BLAS: 'off' },
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  child.stdout.resume();
  const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
  return new Promise((resolve) => {
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe('an uncaught error in a worker on the wasm backend', () => {
  it('prints the NnError with its code and fix and exits with code 1', async () => {
    const { code, stderr } = await run([...typescriptScriptArguments(), script]);
    expect(code, stderr).toBe(1);
    expect(stderr).toMatch(/NnError: Linear\(8 → 8\): the input's last dimension is 7, expected 8/);
    expect(stderr).toMatch(/Fix: pass an input of shape \[\.\.\., 8\]/);
    expect(stderr).toMatch(/code: 'shape-mismatch'/);
    expect(stderr).not.toMatch(/tf-backend-wasm/);
  }, 100_000);

  it('fsdp-run reports it once, for the rank that threw, with its code and fix, and names that rank and its exit code', async () => {
    const { code, stderr } = await run([...fsdpRunArguments(), '--nproc-per-node', '2', script]);
    expect(code, stderr).not.toBe(0);
    expect(stderr).toMatch(
      /fsdp-run: failure on rank 1: NnError \(code shape-mismatch\): Linear\(8 → 8\): the input's last dimension is 7, expected 8/,
    );
    expect(stderr).toMatch(/fsdp-run: {3}Fix: pass an input of shape \[\.\.\., 8\]/);
    expect(stderr).toMatch(/fsdp-run: rank 1 \(local rank 1\) exited with code 1/);
    // The dump (stack, typed fields) goes to the rank's log file, not to stderr.
    expect(stderr).not.toMatch(/\[rank \d\] NnError/);
    expect(stderr).not.toMatch(/tf-backend-wasm/);
  }, 100_000);
});
