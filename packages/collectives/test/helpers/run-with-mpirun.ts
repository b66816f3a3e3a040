import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface MpirunRun {
  /** mpirun's exit code (non-zero when any rank failed). */
  code: number | null;
  /** Each rank's result file (TEST_RESULT_DIR/<name>-<rank>.json), parsed, by rank. */
  results: Map<number, unknown>;
  output: string;
}

/**
 * The flags every mpirun of the tests passes: root is allowed (CI runs as root), more ranks than
 * cores (W=3 on 2 cores), and no binding (a rank has several threads: main, communication
 * worker, tfjs; Open MPI binds each rank to one core by default at -np 2).
 */
export const MPIRUN_FLAGS = ['--allow-run-as-root', '--oversubscribe', '--bind-to', 'none'];

/**
 * Runs `mpirun -np <size> node <script> <args>` from source (TypeScript through tsx). Ranks write
 * their results to files in TEST_RESULT_DIR (mpirun interleaves long stdout lines of several
 * ranks). Bounded: mpirun is killed after `timeoutMs`.
 */
export function runWithMpirun(
  size: number,
  script: URL,
  args: string[],
  options: { timeoutMs: number; env?: Record<string, string> },
): Promise<MpirunRun> {
  const directory = mkdtempSync(join(tmpdir(), 'fsdp-mpirun-'));
  const child = spawn(
    'mpirun',
    [
      ...MPIRUN_FLAGS,
      '-np',
      String(size),
      process.execPath,
      '--conditions=@fsdp-ts/source',
      '--import',
      'tsx',
      fileURLToPath(script),
      ...args,
    ],
    {
      env: { ...process.env, ...options.env, TEST_RESULT_DIR: directory },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  const collect = (chunk: Buffer) => {
    output += chunk.toString();
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      const results = new Map<number, unknown>();
      for (const name of readdirSync(directory)) {
        const rank = Number(/-(\d+)\.json$/.exec(name)?.[1]);
        results.set(rank, JSON.parse(readFileSync(join(directory, name), 'utf8')));
      }
      rmSync(directory, { recursive: true, force: true });
      resolve({ code, results, output });
    });
  });
}
