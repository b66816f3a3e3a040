import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * The node arguments that start `fsdp-run` from this installed copy of @fsdp-ts/collectives:
 * `spawn(process.execPath, [...fsdpRunCommand(), '--nproc-per-node', '2', 'train.ts'])`.
 * From source (this module is TypeScript, as in the workspace's tests and examples) it runs
 * `src/bin/fsdp-run.ts` through tsx with the `@fsdp-ts/source` condition; from the build it runs
 * `dist/bin/fsdp-run.js` with plain node.
 */
export function fsdpRunCommand(): string[] {
  const here = moduleUrl();
  if (here.endsWith('.ts')) {
    return [
      '--conditions=@fsdp-ts/source',
      '--import',
      'tsx',
      fileURLToPath(new URL('../bin/fsdp-run.ts', here)),
    ];
  }
  // Built: this code is bundled into dist/index.js (or index.cjs), beside dist/bin/.
  return [fileURLToPath(new URL('./bin/fsdp-run.js', here))];
}

/** This module's URL; the CJS build has no import.meta, but has __filename ([Note: CJS build]). */
function moduleUrl(): string {
  const url: unknown = import.meta.url;
  if (typeof url === 'string') return url;
  return pathToFileURL(__filename).href;
}
