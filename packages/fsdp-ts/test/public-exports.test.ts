import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  formatPublicExports,
  listedRuntimeNames,
  preambleOf,
  publicExportsFile,
  publishedEntries,
  readPublicExports,
  runtimeNames,
  typeOnlyNames,
} from './public-exports';

// [Note: public exports list] in ./public-exports.ts. The umbrella is a curated list of what a
// training script calls (architecture/decisions/2026-12-02-public-surfaces.md), at most this many
// runtime names.
const umbrellaLimit = 120;

const entries = publishedEntries();
const modules = new Map<string, Record<string, unknown>>();
for (const { specifier } of entries) modules.set(specifier, await import(specifier));

describe('public surfaces', () => {
  it('every entry point of every published package exports exactly what public-exports.txt lists, types included', () => {
    const actual = new Map(
      entries.map(({ specifier, source }) => [
        specifier,
        [...runtimeNames(modules.get(specifier)!), ...typeOnlyNames(source).map((name) => `type ${name}`)],
      ]),
    );
    const expected = formatPublicExports(actual, preambleOf(readFileSync(publicExportsFile, 'utf8')));
    if (process.env.UPDATE_PUBLIC_EXPORTS === '1') writeFileSync(publicExportsFile, expected);
    const text = readFileSync(publicExportsFile, 'utf8');
    expect(
      text,
      'a public surface changed: rerun with UPDATE_PUBLIC_EXPORTS=1 to rewrite public-exports.txt, then review its diff',
    ).toBe(expected);
  });

  it(`the umbrella exports at most ${umbrellaLimit} runtime names`, () => {
    const umbrella = listedRuntimeNames(readPublicExports().get('fsdp-ts') ?? []);
    expect(umbrella.length).toBeGreaterThan(0);
    expect(umbrella.length).toBeLessThanOrEqual(umbrellaLimit);
  });

  it("the umbrella's names are its packages' own objects; ./internal repeats nothing of its root entry", () => {
    const umbrella = modules.get('fsdp-ts')!;
    for (const [name, value] of Object.entries(umbrella)) {
      const homes = [...modules].filter(([entry, module]) => entry !== 'fsdp-ts' && name in module);
      expect(homes.length, `${name}: exported by the umbrella, by no package`).toBeGreaterThan(0);
      for (const [entry, module] of homes) expect(value, `${name} (${entry})`).toBe(module[name]);
    }
    for (const [entry, module] of modules) {
      if (!entry.endsWith('/internal')) continue;
      const root = modules.get(entry.slice(0, -'/internal'.length))!;
      expect(
        Object.keys(module).filter((name) => name in root),
        `${entry} repeats names of its root entry`,
      ).toEqual([]);
    }
  });
});
