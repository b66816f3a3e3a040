import { extname, resolve } from 'node:path';
import { CollectiveError } from '../errors.js';
import { PARENT_WATCHDOG_IMPORT } from './parent-watchdog.js';

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

/** tsx resolved from this package (so it is found whatever the script's directory), else bare. */
function resolveTsx(): string {
  try {
    return import.meta.resolve('tsx');
  } catch {
    return 'tsx';
  }
}
