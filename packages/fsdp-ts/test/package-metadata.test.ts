import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

// What npm shows and a user's installer relies on, for every package under packages/ (new ones
// included): see architecture/decisions/2026-11-30-published-packages.md.

const packagesDirectory = join(import.meta.dirname, '..', '..');
const rootLicense = readFileSync(join(packagesDirectory, '..', 'LICENSE'), 'utf8');

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  license?: string;
  engines?: Record<string, string>;
  repository?: { type: string; url: string; directory: string };
  homepage?: string;
  bugs?: { url: string };
  keywords?: string[];
  sideEffects?: boolean | string[];
  files?: string[];
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  scripts?: Record<string, string>;
  bin?: Record<string, string>;
  exports?: Record<string, unknown>;
}

const packages = readdirSync(packagesDirectory)
  .filter((directory) => existsSync(join(packagesDirectory, directory, 'package.json')))
  .map((directory) => ({
    directory,
    manifest: JSON.parse(
      readFileSync(join(packagesDirectory, directory, 'package.json'), 'utf8'),
    ) as Manifest,
  }))
  .filter(({ manifest }) => manifest.private !== true);

/** Every module specifier a package's source imports (static, type-only and dynamic). */
function importedPackages(directory: string): Set<string> {
  const found = new Set<string>();
  const visit = (path: string): void => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const child = join(path, entry.name);
      if (entry.isDirectory()) visit(child);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) {
        const text = readFileSync(child, 'utf8');
        for (const match of text.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)'((?:@[\w.-]+\/)?[\w.-]+)/g)) {
          found.add(match[1]!);
        }
      }
    }
  };
  visit(join(packagesDirectory, directory, 'src'));
  return found;
}

describe.each(packages)('$manifest.name', ({ directory, manifest }) => {
  it('ships the Apache-2.0 LICENSE it declares', () => {
    expect(manifest.license).toBe('Apache-2.0');
    expect(readFileSync(join(packagesDirectory, directory, 'LICENSE'), 'utf8')).toBe(rootLicense);
    expect(manifest.files).toContain('LICENSE');
  });

  it('has engines, repository, homepage, bugs, keywords and sideEffects', () => {
    expect(manifest.engines?.node).toMatch(/^>=\d+/);
    expect(manifest.repository?.directory).toBe(`packages/${directory}`);
    expect(manifest.homepage).toContain(`packages/${directory}`);
    expect(manifest.bugs?.url).toMatch(/^https:\/\//);
    expect(manifest.keywords?.length ?? 0).toBeGreaterThan(2);
    expect(manifest.sideEffects).toBeDefined();
  });

  it('ships its source or source maps, not both, and no tests', () => {
    expect(manifest.files).toContain('src');
    expect(manifest.files).toContain('!src/**/*.test.ts');
    const tsup = readFileSync(join(packagesDirectory, directory, 'tsup.config.ts'), 'utf8');
    expect(tsup).not.toMatch(/sourcemap:\s*true/);
  });

  it('declares exactly the project packages it imports, and tfjs-core as a peer', () => {
    const imported = importedPackages(directory);
    const projectDependencies = Object.keys(manifest.dependencies ?? {}).filter(
      (name) => name.startsWith('@fsdp-ts/') || name === 'fsdp-ts',
    );
    const projectImports = [...imported].filter((name) => name.startsWith('@fsdp-ts/')).sort();
    expect(projectDependencies.sort()).toEqual(projectImports);
    if (imported.has('@tensorflow/tfjs-core') || directory === 'fsdp-ts') {
      expect(manifest.peerDependencies?.['@tensorflow/tfjs-core']).toBe('^4.22.0');
      expect(manifest.dependencies?.['@tensorflow/tfjs-core']).toBeUndefined();
      expect(manifest.devDependencies?.['@tensorflow/tfjs-core']).toBeDefined();
    }
    expect(manifest.dependencies?.['@tensorflow/tfjs']).toBeUndefined();
  });

  it('gives every entry point (`.`, `./internal`) the source condition, ESM and CommonJS builds, types first', () => {
    // architecture/decisions/2026-12-02-public-surfaces.md: `./internal` is built like `.`.
    const tsup = readFileSync(join(packagesDirectory, directory, 'tsup.config.ts'), 'utf8');
    for (const [subpath, target] of Object.entries(manifest.exports ?? {})) {
      if (subpath === './package.json') continue;
      const name = subpath === '.' ? 'index' : subpath.replace(/^\.\//, '');
      const source = subpath === '.' ? './src/index.ts' : `./src/${name}/index.ts`;
      expect(target, subpath).toEqual({
        '@fsdp-ts/source': source,
        import: { types: `./dist/${name}.d.ts`, default: `./dist/${name}.js` },
        require: { types: `./dist/${name}.d.cts`, default: `./dist/${name}.cjs` },
      });
      expect(existsSync(join(packagesDirectory, directory, source)), source).toBe(true);
      if (subpath !== '.') {
        expect(tsup, `tsup.config.ts builds ${source}`).toContain(`${name}: '${source.slice(2)}'`);
      }
    }
  });

  it('builds itself before `npm pack` and `npm publish` (prepack), so no tarball lacks dist/', () => {
    expect(manifest.scripts?.build).toBeDefined();
    expect(manifest.scripts?.prepack).toBe('npm run build');
  });

  it('links its bins from committed files, so `npm ci` in a fresh clone links them', () => {
    // [Note: fsdp-run bin entry] npm links a workspace bin only if its target exists at install
    // time, and dist/ does not exist before the build.
    for (const [name, target] of Object.entries(manifest.bin ?? {})) {
      expect(target, name).not.toMatch(/^(\.\/)?dist\//);
      expect(existsSync(join(packagesDirectory, directory, target)), `${name}: ${target}`).toBe(true);
      expect(manifest.files, name).toContain(target.replace(/^\.\//, '').split('/')[0]);
    }
  });
});
