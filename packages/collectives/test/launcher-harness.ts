/**
 * Test harness for jobs started through fsdp-run (real processes), shared by the launcher tests
 * and the multi-process collectives tests: `await bundleLauncher()` in a beforeAll, then
 * `launch([...fsdp-run arguments])`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

export const packageRoot = fileURLToPath(new URL('..', import.meta.url));
export const fixture = (name: string) => join(packageRoot, 'test', 'fixtures', name);

/**
 * [Note: launcher bundle] Tests run fsdp-run as one bundled .mjs file (what the published dist
 * bin is), built from source once per test file: starting it through tsx costs ~1.5 s per launch
 * on this loaded machine, and the multi-process tests launch it a dozen times.
 */
let launcherBundle: Promise<string> | undefined;
let bundledPath: string | undefined;

export function bundleLauncher(): Promise<string> {
  launcherBundle ??= (async () => {
    // Under the package's node_modules, so the external zeromq (a native addon) resolves from it.
    const cache = join(packageRoot, 'node_modules', '.cache');
    mkdirSync(cache, { recursive: true });
    const outfile = join(mkdtempSync(join(cache, 'fsdp-run-bundle-')), 'fsdp-run.mjs');
    await build({
      entryPoints: [join(packageRoot, 'src/bin/fsdp-run.ts')],
      outfile,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      banner: {
        js: "import { createRequire as createRequireForBundle } from 'node:module'; const require = createRequireForBundle(import.meta.url);",
      },
      external: ['zeromq'],
      // Workspace packages (@fsdp-ts/errors) from their sources, as vitest resolves them.
      conditions: ['@fsdp-ts/source'],
      logLevel: 'silent',
    });
    bundledPath = outfile;
    return outfile;
  })();
  return launcherBundle;
}

export interface Launch {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /**
   * Resolves once stdout (or stderr) matches `pattern` `count` times; rejects if the launcher
   * exits first.
   */
  waitForOutput(pattern: RegExp, count: number, stream?: 'stdout' | 'stderr'): Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts fsdp-run with `args`: the bundle (call bundleLauncher first) or, with `fromSource`, the
 * TypeScript source through tsx. `env` is added to this process's environment.
 */
export function launch(args: string[], env: NodeJS.ProcessEnv = {}, fromSource = false): Launch {
  if (!fromSource && bundledPath === undefined)
    throw new Error('call `await bundleLauncher()` in a beforeAll first');
  const launcher = fromSource
    ? ['--conditions=@fsdp-ts/source', '--import', 'tsx', join(packageRoot, 'src/bin/fsdp-run.ts')]
    : [bundledPath!];
  // The ranks resolve workspace packages (@fsdp-ts/errors) to their sources as vitest does, not
  // to a dist/ that may be stale or absent: the bundled launcher does not run from source itself.
  const nodeOptions = [process.env.NODE_OPTIONS, '--conditions=@fsdp-ts/source'].filter(Boolean).join(' ');
  const child = spawn(process.execPath, [...launcher, ...args], {
    cwd: packageRoot,
    env: { ...process.env, NODE_OPTIONS: nodeOptions, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const listeners = new Set<() => void>();
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    for (const listener of listeners) listener();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    for (const listener of listeners) listener();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    waitForOutput: (pattern, count, stream = 'stdout') =>
      new Promise((resolve, reject) => {
        const check = () => {
          const text = stream === 'stdout' ? stdout : stderr;
          if ((text.match(new RegExp(pattern.source, 'g')) ?? []).length >= count) {
            listeners.delete(check);
            resolve();
          }
        };
        listeners.add(check);
        check();
        exited.then(() =>
          reject(new Error(`launcher exited before ${count} × ${pattern}:\n${stdout}\n${stderr}`)),
        );
      }),
  };
}

/**
 * Whether `pid` still runs. A zombie does not count: here PID 1 (the VM's init) does not reap
 * re-parented processes, so a killed orphan stays a zombie, dead but visible to kill(pid, 0).
 */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // /proc/<pid>/stat: "pid (command) state ...", the command may contain spaces.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Waits (bounded) until none of `pids` runs; returns the survivors at the deadline. */
export async function survivorsAfter(pids: number[], deadlineMs: number): Promise<number[]> {
  const deadline = Date.now() + deadlineMs;
  while (pids.some(alive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return pids.filter(alive);
}

/** A port that was free a moment ago (for multi-node tests, which need a fixed --master-port). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

export function linesOf(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}
