import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

// [Note: public exports list]
// `public-exports.txt` beside this file lists the runtime names of every entry point of every
// published package (`.` and any subpath such as `./internal`), sorted, under a `[entry]` line.
// public-exports.test.ts compares it with the sources; installed-app.int.test.ts with the packages
// as a user installs them. So every change of a public surface is a diff of that file, reviewed
// with the change. Type-only exports have no runtime name and are not listed: the diff of the
// package's src/index.ts shows them, and the API reference test requires their doc comments.

const root = join(import.meta.dirname, '..', '..', '..');
export const publicExportsFile = join(import.meta.dirname, 'public-exports.txt');

/** The entries `public-exports.txt` lists, each with its sorted runtime names. */
export function readPublicExports(text = readFileSync(publicExportsFile, 'utf8')): Map<string, string[]> {
  const entries = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      current = [];
      entries.set(header[1]!, current);
    } else if (current === undefined) {
      throw new Error(`public-exports.txt: "${line}" comes before any [entry] line`);
    } else {
      current.push(line);
    }
  }
  return entries;
}

/** The text of `public-exports.txt` for these entries (what the file should say). */
export function formatPublicExports(entries: Map<string, readonly string[]>, preamble: string): string {
  const sections = [...entries].map(([entry, names]) => `[${entry}]\n${names.join('\n')}\n`);
  return `${preamble}\n${sections.join('\n')}`;
}

/** The leading comment lines of `public-exports.txt`. */
export function preambleOf(text: string): string {
  const lines = text.split('\n');
  const end = lines.findIndex((line) => line.startsWith('['));
  return `${lines.slice(0, end).join('\n').trimEnd()}\n`;
}

/**
 * Every entry point of every published package, as an import specifier (`@fsdp-ts/tensor`,
 * `@fsdp-ts/tensor/internal`), from each package.json's `exports`, in package directory order.
 */
export function publishedEntries(): string[] {
  const entries: string[] = [];
  for (const directory of readdirSync(join(root, 'packages')).sort()) {
    const manifestPath = join(root, 'packages', directory, 'package.json');
    if (!existsSync(manifestPath)) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as {
      name: string;
      private?: boolean;
      exports?: Record<string, unknown>;
    };
    if (manifest.private === true) continue;
    for (const subpath of Object.keys(manifest.exports ?? { '.': '' })) {
      if (subpath === './package.json') continue;
      entries.push(subpath === '.' ? manifest.name : `${manifest.name}/${subpath.replace(/^\.\//, '')}`);
    }
  }
  return entries;
}

/** The sorted runtime names of a module namespace (what `import *` or `require` gives). */
export function runtimeNames(module: object): string[] {
  return Object.keys(module)
    .filter((name) => name !== 'default' && name !== '__esModule')
    .sort();
}
