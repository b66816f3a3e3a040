import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, extname, join } from 'node:path';
import { CollectiveError } from '../errors.js';

/**
 * [Note: CommonJS apps and top-level await]
 * tsx compiles a `.ts` file as CommonJS unless the nearest package.json says `"type": "module"`,
 * and `npm init -y` writes `"type": "commonjs"`. A script with top-level await (every example in
 * the READMEs) then fails on every rank with esbuild's "Top-level await is currently not supported
 * with the "cjs" output format", which names no fix. The launcher compiles the script once the
 * way tsx would, with tsx's own esbuild, before any rank starts, and stops with the one-line fix.
 * It does not switch the script to ESM itself: a CommonJS script may rely on `require`,
 * `__dirname` or `require.main`, which an ES module lacks.
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
