import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface LauncherRun {
  /** fsdp-run's exit code (non-zero when any worker failed). */
  code: number | null;
  /** Each rank's parsed `RESULT <json>` line, by rank. */
  results: Map<number, unknown>;
  output: string;
}

const launcher = fileURLToPath(new URL('../../src/bin/fsdp-run.ts', import.meta.url));

/**
 * Runs `fsdp-run --nproc-per-node <size> <script> <args>` from source (real processes with the
 * env:// contract) and collects each rank's `[rank r] RESULT <json>` line. Bounded: the
 * launcher is killed after `timeoutMs`.
 */
export function runWithLauncher(
  size: number,
  script: URL,
  args: string[],
  options: { timeoutMs: number; env?: Record<string, string>; launcherArgs?: string[] },
): Promise<LauncherRun> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@fsdp-ts/source',
      '--import',
      'tsx',
      launcher,
      '--nproc-per-node',
      String(size),
      ...(options.launcherArgs ?? []),
      fileURLToPath(script),
      ...args,
    ],
    { env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
  return new Promise((resolve) => {
    child.on('exit', (code) => {
      clearTimeout(timer);
      const results = new Map<number, unknown>();
      for (const line of output.split('\n')) {
        const match = /^\[rank (\d+)\] RESULT (.*)$/.exec(line);
        if (match !== null) results.set(Number(match[1]), JSON.parse(match[2]!));
      }
      resolve({ code, results, output });
    });
  });
}
