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
  if (!fromSource) return new Worker(url, options);
  if (entry === 'comm-worker') return new Worker(bundledFromSource(url, here), options);
  // The package's CommonJS build of tsx/esm/api cannot be import()ed; its ESM twin sits beside it.
  const tsxApiPath = createRequire(here)
    .resolve('tsx/esm/api')
    .replace(/\.cjs$/, '.mjs');
  const tsxApi = pathToFileURL(tsxApiPath).href;
  const bootstrap = `import(${JSON.stringify(tsxApi)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(url.href)}); });`;
  const execArgv = [...(options.execArgv ?? []), '--conditions=@fsdp-ts/source'];
  return new Worker(bootstrap, { ...options, eval: true, execArgv });
}

export function moduleUrl(): string {
  const url: unknown = import.meta.url;
  if (typeof url === 'string') return url;
  return pathToFileURL(__filename).href;
}

/** Bundled once with esbuild, cached in tmpdir under a hash of the sources: no TypeScript loader per worker. */
function bundledFromSource(entry: URL, here: string): URL {
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
  if (!module.pathname.endsWith('.ts')) return module.href;
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
