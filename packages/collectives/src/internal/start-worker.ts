import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker, type WorkerOptions } from 'node:worker_threads';

/** The worker entries this package ships (tsup builds each to `dist/<name>.js`). */
export type WorkerEntry = 'comm-worker' | 'thread-rank-entry';

/**
 * Starts one of the package's worker entries next to this module.
 *
 * [Note: worker entries] From source (vitest, tsx) this module is `src/internal/start-worker.ts`
 * and the entries are the `.ts` files beside it; Node cannot run them, and `--import tsx` in a
 * Worker's execArgv does not apply to its first module on Node 20, so a two-line bootstrap
 * registers tsx's loader in the worker before importing the entry. From the build, tsup bundles
 * this module into `dist/index.js` (or `index.cjs`) and emits the entries as `dist/<name>.js`
 * beside it, so the same relative URL finds them.
 */
export function startWorker(entry: WorkerEntry, options: WorkerOptions): Worker {
  const here = moduleUrl();
  const fromSource = here.endsWith('.ts');
  // From the CJS build too, the ESM entries (`.js`) are started: a Worker runs them either way.
  const url = new URL(`./${entry}.${fromSource ? 'ts' : 'js'}`, here);
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

/** This module's URL; the CJS build has no import.meta, but has __filename. */
function moduleUrl(): string {
  const url: unknown = import.meta.url;
  if (typeof url === 'string') return url;
  return pathToFileURL(__filename).href;
}
