import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

// [Note: public exports list]
// `public-exports.txt` beside this file lists what every entry point of every published package
// (`.` and any subpath such as `./internal`) exports, under a `[entry]` line: its runtime names,
// sorted, then its type-only names as `type Name`, sorted. public-exports.test.ts compares it with
// the sources (runtime names from the loaded module, types from the entry's syntax);
// installed-app.int.test.ts compares the runtime names with the packages as a user installs them
// (a type has no runtime name to see there). So every change of a public surface is a diff of
// that file, reviewed with the change.

const root = join(import.meta.dirname, '..', '..', '..');
export const publicExportsFile = join(import.meta.dirname, 'public-exports.txt');

/** The entries `public-exports.txt` lists, each with its lines (runtime names, then `type Name`s). */
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

/** One entry point of a published package: its import specifier and its source file. */
export interface PublishedEntry {
  /** `@fsdp-ts/tensor`, `@fsdp-ts/tensor/internal`, `fsdp-ts`. */
  specifier: string;
  /** The file its `@fsdp-ts/source` condition names, absolute. */
  source: string;
}

/**
 * Every entry point of every published package, from each package.json's `exports`, in package
 * directory order.
 */
export function publishedEntries(): PublishedEntry[] {
  const entries: PublishedEntry[] = [];
  for (const directory of readdirSync(join(root, 'packages')).sort()) {
    const manifestPath = join(root, 'packages', directory, 'package.json');
    if (!existsSync(manifestPath)) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as {
      name: string;
      private?: boolean;
      exports?: Record<string, { '@fsdp-ts/source'?: string } | string>;
    };
    if (manifest.private === true) continue;
    for (const [subpath, target] of Object.entries(manifest.exports ?? {})) {
      if (subpath === './package.json') continue;
      const source = typeof target === 'string' ? undefined : target['@fsdp-ts/source'];
      if (source === undefined)
        throw new Error(`${manifest.name}: exports["${subpath}"] has no @fsdp-ts/source`);
      entries.push({
        specifier: subpath === '.' ? manifest.name : `${manifest.name}/${subpath.replace(/^\.\//, '')}`,
        source: join(root, 'packages', directory, source),
      });
    }
  }
  return entries;
}

/**
 * The sorted type-only names an entry's source exports (`export type { A }`, `export { type B }`),
 * read from its syntax. Every entry exports by explicit lists (CONVENTIONS: "src/index.ts exports
 * every public name explicitly"), so any other export statement is an error here.
 */
export function typeOnlyNames(source: string): string[] {
  const file = ts.createSourceFile(source, readFileSync(source, 'utf8'), ts.ScriptTarget.Latest, false);
  const names: string[] = [];
  for (const statement of file.statements) {
    const exported =
      ts.canHaveModifiers(statement) &&
      ts.getModifiers(statement)?.some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword);
    if (!ts.isExportDeclaration(statement)) {
      if (exported || ts.isExportAssignment(statement)) {
        throw new Error(
          `${source}: export only through \`export { ... } from\` lists, not "${statement.getText(file)}"`,
        );
      }
      continue;
    }
    const clause = statement.exportClause;
    if (clause === undefined || !ts.isNamedExports(clause)) {
      throw new Error(`${source}: "${statement.getText(file)}" re-exports a whole module; name each export`);
    }
    for (const specifier of clause.elements) {
      if (statement.isTypeOnly || specifier.isTypeOnly) names.push(specifier.name.text);
    }
  }
  return names.sort();
}

/** The sorted runtime names of a module namespace (what `import *` or `require` gives). */
export function runtimeNames(module: object): string[] {
  return Object.keys(module)
    .filter((name) => name !== 'default' && name !== '__esModule')
    .sort();
}

/** The runtime names among an entry's listed lines (those not starting with `type `). */
export function listedRuntimeNames(lines: readonly string[]): string[] {
  return lines.filter((line) => !line.startsWith('type '));
}
