import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  formatPublicExports,
  preambleOf,
  publicExportsFile,
  publishedEntries,
  readPublicExports,
  runtimeNames,
} from './public-exports';

// [Note: public exports list] in ./public-exports.ts. The umbrella is a curated list of what a
// training script calls (architecture/decisions/2026-12-02-public-surfaces.md), at most this many
// runtime names.
const umbrellaLimit = 120;

const modules = new Map<string, Record<string, unknown>>();
for (const entry of publishedEntries()) modules.set(entry, await import(entry));

describe('public surfaces', () => {
  it('every entry point of every published package exports exactly what public-exports.txt lists', () => {
    const actual = new Map([...modules].map(([entry, module]) => [entry, runtimeNames(module)]));
    const expected = formatPublicExports(actual, preambleOf(readFileSync(publicExportsFile, 'utf8')));
    if (process.env.UPDATE_PUBLIC_EXPORTS === '1') writeFileSync(publicExportsFile, expected);
    const text = readFileSync(publicExportsFile, 'utf8');
    expect(
      text,
      'a public surface changed: rerun with UPDATE_PUBLIC_EXPORTS=1 to rewrite public-exports.txt, then review its diff',
    ).toBe(expected);
  });

  it(`the umbrella exports at most ${umbrellaLimit} runtime names`, () => {
    const umbrella = readPublicExports().get('fsdp-ts');
    expect(umbrella).toBeDefined();
    expect(umbrella!.length).toBeGreaterThan(0);
    expect(umbrella!.length).toBeLessThanOrEqual(umbrellaLimit);
  });

  it("the umbrella's names are its packages' own objects, and each name has one home", () => {
    const umbrella = modules.get('fsdp-ts')!;
    const homes = new Map<string, string[]>();
    for (const [entry, module] of modules) {
      if (entry === 'fsdp-ts') continue;
      for (const name of Object.keys(module)) homes.set(name, [...(homes.get(name) ?? []), entry]);
    }
    for (const [name, value] of Object.entries(umbrella)) {
      const entries = homes.get(name) ?? [];
      expect(
        entries,
        `${name} is exported by the umbrella and by ${entries.length} package entries`,
      ).toHaveLength(1);
      expect(value, name).toBe(modules.get(entries[0]!)![name]);
    }
    // A name in a package's ./internal entry is not also in its root entry (or any other).
    for (const [name, entries] of homes) expect(entries, name).toHaveLength(1);
  });
});
