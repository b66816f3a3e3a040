import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker, type WorkerOptions } from 'node:worker_threads';

export type WorkerEntry = 'comm-worker' | 'thread-rank-entry';

/**
 * [Note: worker entries] From the build, tsup emits the entries as `dist/<name>.js` beside the
 * bundle, so a relative URL finds them. From source, Node cannot run `.ts` and `--import tsx`
 * does not apply to a Worker's first module on Node 20: the communication worker is bundled by
 * esbuild (with the `@fsdp-ts/source` condition, so @fsdp-ts/errors and @fsdp-ts/kernels are
 * bundled in and part of the cache key), other entries start through a bootstrap that registers
 * tsx first.
 */
export function startWorker(entry: WorkerEntry, options: WorkerOptions): Worker {
  const here = moduleUrl();
  const fromSource = here.endsWith('.ts');
  // The CJS build starts the ESM entries too.
  const url = new URL(`./${entry}.${fromSource ? 'ts' : 'js'}`, here);
  if (entry === 'comm-worker')
    return startWithoutLoaders(fromSource ? bundledFromSource(url, here) : url, options);
  if (!fromSource) return new Worker(url, options);
  // The package's CommonJS build of tsx/esm/api cannot be import()ed; its ESM twin sits beside it.
  const tsxApiPath = createRequire(here)
    .resolve('tsx/esm/api')
    .replace(/\.cjs$/, '.mjs');
  const tsxApi = pathToFileURL(tsxApiPath).href;
  const bootstrap = `import(${JSON.stringify(tsxApi)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(url.href)}); });`;
  const execArgv = [...(options.execArgv ?? []), '--conditions=@fsdp-ts/source'];
  return new Worker(bootstrap, { ...options, eval: true, execArgv });
}

/**
 * [Note: the communication worker starts without loaders] A Worker inherits its thread's
 * `execArgv`, so a rank started as `node --import tsx script.ts` (fsdp-run's way with a `.ts`
 * script) would register tsx's module hooks in its communication worker too: about 200 ms of
 * each group's start on a quiet 2-core machine (a W=3 `newGroup` 250-350 ms with them, 100-130 ms
 * without). The worker runs only plain JavaScript (the build's, or the bundle below, and engine
 * modules made loadable by `loadableModule`), so it starts without `--import`, `--require` and
 * `--loader`; every other flag is kept. Where the process has V8 or process-wide flags as well,
 * which an explicit list may not hold, it inherits them all (`startWithoutLoaders`).
 */
function startWithoutLoaders(url: URL, options: WorkerOptions): Worker {
  const flags = options.execArgv ?? process.execArgv;
  const kept = withoutLoaderFlags(flags);
  if (kept.length === flags.length) return new Worker(url, options); // inherits, as a Worker does
  try {
    return new Worker(url, { ...options, execArgv: kept });
  } catch (error) {
    // An explicit execArgv may not hold V8 or process-wide flags (`--max-old-space-size`,
    // `--expose-gc`: ERR_WORKER_INVALID_EXEC_ARGV), which an inherited one may: such a rank's
    // worker inherits everything, loaders included, as before.
    if ((error as { code?: unknown }).code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw error;
    return new Worker(url, options);
  }
}

const LOADER_FLAGS = ['--import', '--require', '-r', '--loader', '--experimental-loader'];

function withoutLoaderFlags(flags: readonly string[]): string[] {
  const kept: string[] = [];
  for (let index = 0; index < flags.length; index++) {
    const flag = flags[index]!;
    if (LOADER_FLAGS.includes(flag))
      index++; // and its value
    else if (!LOADER_FLAGS.some((loader) => flag.startsWith(`${loader}=`))) kept.push(flag);
  }
  return kept;
}

export function moduleUrl(): string {
  const url: unknown = import.meta.url;
  if (typeof url === 'string') return url;
  return pathToFileURL(__filename).href;
}

const bundles = new Map<string, URL>();

/** Bundled once with esbuild, cached in tmpdir under a hash of the sources: no TypeScript loader per worker. */
function bundledFromSource(entry: URL, here: string): URL {
  // The sources do not change under a running process: each entry is hashed once (bundled again
  // only if its file left tmpdir).
  const known = bundles.get(entry.href);
  if (known !== undefined && existsSync(known)) return known;
  const directory = fileURLToPath(new URL('./', entry));
  const hash = createHash('sha256');
  const walk = (folder: string): void => {
    for (const name of readdirSync(folder, { withFileTypes: true }).sort((a, b) =>
      a.name.localeCompare(b.name),
    )) {
      const path = join(folder, name.name);
      if (name.isDirectory()) walk(path);
      else if (name.name.endsWith('.ts')) hash.update(path).update(readFileSync(path));
    }
  };
  walk(fileURLToPath(new URL('../', entry)));
  for (const dependency of WORKER_PACKAGES) walk(join(packageDirectory(dependency, here), 'src'));
  const output = join(tmpdir(), `fsdp-ts-comm-worker-${hash.digest('hex').slice(0, 16)}.mjs`);
  if (!existsSync(output)) writeAtomically(output, bundle(entry, here, directory));
  bundles.set(entry.href, pathToFileURL(output));
  return pathToFileURL(output);
}

const WORKER_PACKAGES = ['@fsdp-ts/errors', '@fsdp-ts/kernels'] as const;

function packageDirectory(name: string, here: string): string {
  return fileURLToPath(new URL('./', pathToFileURL(createRequire(here).resolve(`${name}/package.json`))));
}

function bundle(entry: URL, here: string, directory: string): string {
  const esbuild = createRequire(here)('esbuild') as {
    buildSync(options: Record<string, unknown>): { outputFiles: { text: string }[] };
  };
  const result = esbuild.buildSync({
    entryPoints: [fileURLToPath(entry)],
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    conditions: ['@fsdp-ts/source'],
    write: false,
    absWorkingDir: directory,
  });
  return result.outputFiles[0]!.text;
}

function writeAtomically(path: string, text: string): void {
  const temporary = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  writeFileSync(temporary, text);
  renameSync(temporary, path);
}

/** `require` from this package (koffi, esbuild, tsx). */
export function packageRequire(): NodeJS.Require {
  return createRequire(moduleUrl());
}

export function resolveKoffi(): string | undefined {
  try {
    return packageRequire().resolve('koffi');
  } catch {
    return undefined;
  }
}

const loadable = new Map<string, string>();

/** An outside engine module the worker can import: TypeScript bundled once per process into tmpdir. */
export function loadableModule(module: URL): string {
  if (!/\.[cm]?tsx?$/.test(module.pathname)) return module.href;
  const known = loadable.get(module.href);
  if (known !== undefined) return known;
  const text = bundle(module, moduleUrl(), fileURLToPath(new URL('./', module)));
  const hash = createHash('sha256').update(text).digest('hex').slice(0, 16);
  const output = join(tmpdir(), `fsdp-ts-engine-${hash}.mjs`);
  if (!existsSync(output)) writeAtomically(output, text);
  const href = pathToFileURL(output).href;
  loadable.set(module.href, href);
  return href;
}
