import type { ChildProcess } from 'node:child_process';

/** A launched fsdp-run (or any child) whose output a test waits on. */
export interface WatchedLaunch {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** stdout and stderr interleaved in arrival order. */
  output(): string;
  exited: Promise<number | null>;
  /** Resolves when the watched text matches every pattern; rejects if the child exits first. */
  waitFor(patterns: RegExp[]): Promise<void>;
}

/**
 * Collects a child's output, kills it with SIGKILL after `limitMs` (a hung launch fails the test,
 * it does not hang it), and lets a test wait for lines: on stdout alone (`match: 'stdout'`) or on
 * both streams (`'output'`). `name` says whose exit a rejected wait reports.
 */
export function watchLaunch(
  child: ChildProcess,
  limitMs: number,
  { name, match }: { name: string; match: 'stdout' | 'output' },
): WatchedLaunch {
  let stdout = '';
  let stderr = '';
  let output = '';
  const listeners = new Set<() => void>();
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    output += chunk.toString();
    for (const listener of listeners) listener();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    output += chunk.toString();
    if (match === 'output') for (const listener of listeners) listener();
  });
  const limit = setTimeout(() => child.kill('SIGKILL'), limitMs);
  const exited = new Promise<number | null>((resolve) =>
    child.once('close', (code) => {
      clearTimeout(limit);
      resolve(code);
    }),
  );
  const waitFor = (patterns: RegExp[]) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        const text = match === 'stdout' ? stdout : output;
        if (patterns.every((pattern) => pattern.test(text))) {
          listeners.delete(check);
          resolve();
        }
      };
      listeners.add(check);
      check();
      void exited.then(() => reject(new Error(`${name} exited before ${patterns.join(', ')}:\n${output}`)));
    });
  return { child, stdout: () => stdout, stderr: () => stderr, output: () => output, exited, waitFor };
}
