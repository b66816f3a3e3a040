import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CollectiveError } from '../errors.js';
import { checkTopLevelAwaitFormat } from './module-format-check.js';
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
