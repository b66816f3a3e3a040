import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CollectiveError } from '../errors.js';
import type { LaunchOptions } from './launch-options.js';

const TYPESCRIPT_EXTENSIONS = new Set(['.ts', '.mts', '.cts', '.tsx']);
const JAVASCRIPT_EXTENSIONS = new Set(['.js', '.mjs', '.cjs']);

/** Whether this launcher runs from TypeScript source (then workers resolve packages to source too). */
export function launcherRunsFromSource(): boolean {
  // [Note: CJS build] tsup also emits a CJS copy, where import.meta is empty.
  const url: unknown = import.meta.url;
  return typeof url === 'string' && url.endsWith('.ts');
}

/**
 * The node command line of one worker: `.js`/`.mjs`/`.cjs` with plain node, `.ts` through tsx
 * (`--import tsx`, plus `--conditions=@fsdp-ts/source` when the launcher itself runs from source,
 * so workspace packages resolve to their source). Every worker also imports the parent watchdog.
 */
export function buildWorkerCommand(script: string, scriptArguments: readonly string[]): string[] {
  const extension = extname(script);
  const nodeArguments: string[] = [];
  if (TYPESCRIPT_EXTENSIONS.has(extension)) {
    if (launcherRunsFromSource()) nodeArguments.push('--conditions=@fsdp-ts/source');
    nodeArguments.push('--import', resolveTsx());
  } else if (!JAVASCRIPT_EXTENSIONS.has(extension)) {
    throw new CollectiveError(`fsdp-run cannot run '${script}': expected a .js, .mjs, .cjs or .ts file.`, {
      code: 'launch',
      fix: 'pass the path of the training script (compiled .js, or .ts which runs through tsx).',
    });
  }
  nodeArguments.push('--import', PARENT_WATCHDOG_IMPORT);
  return [...nodeArguments, resolve(script), ...scriptArguments];
}

/**
 * Checks, once and before any rank starts, what every rank would otherwise fail on with its own
 * stack trace: a script that does not exist, a TypeScript script without tsx installed, and one
 * with top-level await that tsx would compile as CommonJS ([Note: CommonJS apps and top-level await]).
 */
export function checkWorkerScript(script: string): void {
  const path = resolve(script);
  if (!existsSync(path) || !statSync(path).isFile()) {
    throw new CollectiveError(`script not found: ${path}`, {
      code: 'launch',
      fix: 'pass the path of the training script, relative to the current directory or absolute.',
    });
  }
  if (!TYPESCRIPT_EXTENSIONS.has(extname(script))) return;
  const tsx = findTsx(path);
  if (tsx === undefined) {
    throw new CollectiveError(`running ${script} needs tsx, which is not installed.`, {
      code: 'launch',
      fix: 'run `npm install --save-dev tsx` in your project, or compile the script and pass the .js file.',
    });
  }
  checkTopLevelAwaitFormat(path, tsx);
}

/**
 * tsx resolved from this package, else from the script's directory (a global fsdp-run with a
 * project-local tsx), else undefined.
 */
function findTsx(script: string): string | undefined {
  try {
    return import.meta.resolve('tsx');
  } catch {
    try {
      return pathToFileURL(createRequire(script).resolve('tsx')).href;
    } catch {
      return undefined;
    }
  }
}

/** tsx as found by findTsx, else bare (checkWorkerScript has reported its absence already). */
function resolveTsx(): string {
  return findTsx(resolve('package.json')) ?? 'tsx';
}

/**
 * [Note: orphan prevention] SIGKILL of fsdp-run cannot be caught, so each worker watches its
 * parent itself. fsdp-run starts every worker with `--import <PARENT_WATCHDOG_IMPORT>`, a module
 * that (when FSDP_LAUNCHER_PID is set) starts an unref'd worker thread polling `process.ppid`
 * every 200 ms. When the parent changes (fsdp-run died and the worker was re-parented), the
 * thread sends SIGTERM to its process and SIGKILL 5 s later. A thread, not a timer on the main
 * event loop, so it fires even while the main thread is blocked in a synchronous `work.wait()`.
 * fsdp-run also starts each worker in its own process group and signals the whole group, so
 * processes a worker spawns are stopped with it.
 */
const WATCHDOG_THREAD = `
const { workerData } = require('node:worker_threads');
const timer = setInterval(() => {
  if (process.ppid === workerData.parent) return;
  clearInterval(timer);
  try { process.kill(workerData.pid, 'SIGTERM'); } catch {}
  setTimeout(() => { try { process.kill(workerData.pid, 'SIGKILL'); } catch {} }, 5000);
}, 200);
`;

const WATCHDOG_MODULE = `
import { Worker } from 'node:worker_threads';
const parent = Number(process.env.FSDP_LAUNCHER_PID);
if (parent > 0) {
  // [Note: pre-restart signal] fsdp-run's request to checkpoint and exit becomes a flag, never a kill.
  process.on('SIGUSR2', () => { globalThis[Symbol.for('fsdp-ts.restart-requested')] = true; });
  new Worker(${JSON.stringify(WATCHDOG_THREAD)}, { eval: true, workerData: { parent, pid: process.pid } }).unref();
}
`;

/**
 * [Note: failure records] How a worker's crash reaches fsdp-run as one report instead of Node's
 * dump of the error on every rank (torchelastic's TORCHELASTIC_ERROR_FILE is the model). On
 * 'uncaughtException' (Node raises it for unhandled rejections too) the worker preamble writes,
 * synchronously, FSDP_ERROR_LOG (the full util.inspect text) and then FSDP_ERROR_FILE (the error
 * and its causes as a DescribedError record), prints nothing unless FSDP_DEBUG=1, and exits 1 as
 * Node would. A script with its own 'uncaughtException' listener keeps control (the record is
 * still written); if the files cannot be written the text goes to stderr. fsdp-run reads a record
 * only after its worker exited non-zero, so a record needs no atomic rename.
 */
export const FAILURE_RECORDER_MODULE = `
import { writeFileSync as writeFailureFile } from 'node:fs';
import { inspect as inspectFailure } from 'node:util';
const failureRecordPath = process.env.FSDP_ERROR_FILE;
const failureLogPath = process.env.FSDP_ERROR_LOG;
if (failureRecordPath && failureLogPath) {
  const projectMarker = Symbol.for('fsdp-ts.error');
  const describeFailure = (value, depth) => {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) {
      return { name: 'thrown ' + typeof value, message: String(value), project: false };
    }
    let name = 'Error';
    try { name = typeof value.name === 'string' ? value.name : (value.constructor && value.constructor.name) || 'Error'; } catch {}
    const fix = typeof value.fix === 'string' ? value.fix : undefined;
    let message = typeof value.message === 'string' ? value.message : inspectFailure(value, { depth: 2 });
    const suffix = fix === undefined ? undefined : ' Fix: ' + fix;
    if (suffix !== undefined && message.endsWith(suffix)) message = message.slice(0, -suffix.length);
    const described = { name, message, project: value[projectMarker] === true };
    if (fix !== undefined) described.fix = fix;
    if (typeof value.code === 'string' || typeof value.code === 'number') described.code = String(value.code);
    if (Number.isInteger(value.rank)) described.rank = value.rank;
    if (Number.isInteger(value.peer)) described.peer = value.peer;
    if (typeof value.stack === 'string') described.stack = value.stack;
    if (depth < 8 && value.cause !== undefined) described.cause = describeFailure(value.cause, depth + 1);
    return described;
  };
  process.on('uncaughtException', (error, origin) => {
    const ownsExit = process.listenerCount('uncaughtException') === 1;
    let text = 'an uncaught value that cannot be printed';
    try { text = inspectFailure(error, { depth: 8 }); } catch {}
    let written = false;
    try {
      const header = 'rank ' + process.env.RANK + ' (pid ' + process.pid + ', ' + origin + ', ' + new Date().toISOString() + ')';
      writeFailureFile(failureLogPath, header + '\\n' + text + '\\n');
      const record = { version: 1, rank: Number(process.env.RANK), origin, log: failureLogPath, error: describeFailure(error, 0) };
      writeFailureFile(failureRecordPath, JSON.stringify(record));
      written = true;
    } catch {}
    if (!ownsExit) return;
    if (!written || process.env.FSDP_DEBUG === '1') process.stderr.write(text + '\\n');
    process.exit(1);
  });
}
`;

/**
 * A `data:` URL for `node --import`, so no file needs to exist next to the worker script: the
 * worker's preamble, the watchdog and the failure recorder ([Note: failure records]).
 */
export const PARENT_WATCHDOG_IMPORT = `data:text/javascript,${encodeURIComponent(WATCHDOG_MODULE + FAILURE_RECORDER_MODULE)}`;

export interface WorkerIdentity {
  rank: number;
  localRank: number;
  attempt: number;
  secret: string;
  /** The store's actual port (the one picked when --master-port was 0). */
  port: number;
  timeoutMs: number;
}

/**
 * The environment and node arguments of one worker: the launcher's own environment plus the
 * contract of "Environment contract" in the README. FSDP_JOB_SECRET_FILE is removed (the secret
 * itself is passed), so workers never see both.
 */
export function buildWorkerEnvironment(
  options: LaunchOptions,
  parent: NodeJS.ProcessEnv,
  identity: WorkerIdentity,
): { env: NodeJS.ProcessEnv; nodeArguments: string[] } {
  const { FSDP_JOB_SECRET_FILE: _file, ...inherited } = parent;
  const env: NodeJS.ProcessEnv = {
    ...inherited,
    RANK: String(identity.rank),
    WORLD_SIZE: String(options.nnodes * options.nprocPerNode),
    LOCAL_RANK: String(identity.localRank),
    LOCAL_WORLD_SIZE: String(options.nprocPerNode),
    FSDP_NODE_RANK: String(options.nodeRank),
    FSDP_NNODES: String(options.nnodes),
    MASTER_ADDR: options.masterAddr,
    MASTER_PORT: String(identity.port),
    FSDP_JOB_SECRET: identity.secret,
    FSDP_RESTART_COUNT: String(identity.attempt),
    FSDP_STORE_PREFIX: `attempt-${identity.attempt}/`,
    FSDP_AGENT_STORE: '1',
    FSDP_LAUNCHER_PID: String(process.pid),
  };
  if (options.timeoutGiven) env.FSDP_TIMEOUT_MS = String(identity.timeoutMs);
  if (options.socketIfname !== undefined) env.FSDP_SOCKET_IFNAME = options.socketIfname;
  if (options.socketAddr !== undefined) env.FSDP_SOCKET_ADDR = options.socketAddr;
  if (options.secure) env.FSDP_SECURE = '1';
  return { env, nodeArguments: buildWorkerCommand(options.script, options.scriptArguments) };
}

/**
 * [Note: CommonJS apps and top-level await] tsx compiles a `.ts` file as CommonJS unless the
 * nearest package.json says `"type": "module"` (`npm init -y` writes "commonjs"), and a script
 * with top-level await then fails on every rank with an esbuild error that names no fix. The
 * launcher compiles the script once as tsx would, with tsx's own esbuild, before any rank starts,
 * and stops with the one-line fix. It does not switch the script to ESM itself: a CommonJS script
 * may rely on `require`, `__dirname` or `require.main`.
 */
export function checkTopLevelAwaitFormat(script: string, tsxUrl: string): void {
  const extension = extname(script);
  if (extension !== '.ts' && extension !== '.tsx') return; // .mts is ESM, .cts is CommonJS by name
  const manifest = nearestPackageJson(dirname(script));
  const type = manifest === undefined ? undefined : readType(manifest);
  if (type === 'module') return;
  const esbuild = loadEsbuild(tsxUrl);
  if (esbuild === undefined) return;
  try {
    esbuild.transformSync(readFileSync(script, 'utf8'), {
      loader: extension === '.tsx' ? 'tsx' : 'ts',
      format: 'cjs',
      logLevel: 'silent',
    });
  } catch (error) {
    const messages = (error as { errors?: { text?: string }[] }).errors ?? [];
    if (!messages.some((message) => message.text?.includes('Top-level await'))) return; // tsx reports it
    const why =
      manifest === undefined
        ? 'no package.json says "type": "module"'
        : `${manifest} has ${type === undefined ? 'no "type" field' : `"type": "${type}"`}`;
    throw new CollectiveError(
      `${basename(script)} uses top-level await, which needs an ES module, but tsx runs it as CommonJS: ${why}.`,
      {
        code: 'launch',
        expected: 'an ES module',
        actual: type ?? 'commonjs',
        fix: `run \`npm pkg set type=module\` in ${manifest === undefined ? 'your project' : dirname(manifest)}, or rename the script to ${basename(script, extension)}.mts.`,
      },
    );
  }
}

function nearestPackageJson(directory: string): string | undefined {
  for (let current = directory; ; current = dirname(current)) {
    const candidate = join(current, 'package.json');
    if (existsSync(candidate)) return candidate;
    if (dirname(current) === current) return undefined;
  }
}

function readType(manifest: string): string | undefined {
  try {
    const type: unknown = JSON.parse(readFileSync(manifest, 'utf8')).type;
    return typeof type === 'string' ? type : undefined;
  } catch {
    return undefined;
  }
}

interface Esbuild {
  transformSync(source: string, options: { loader: string; format: string; logLevel: string }): unknown;
}

/** The esbuild tsx itself uses (resolved from tsx's own location), or undefined. */
function loadEsbuild(tsxUrl: string): Esbuild | undefined {
  try {
    return createRequire(tsxUrl)('esbuild') as Esbuild;
  } catch {
    return undefined;
  }
}
