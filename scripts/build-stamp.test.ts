import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { testRanksFrom, writeStamp } from './build-stamp';

const trees: string[] = [];
afterEach(() => {
  for (const tree of trees.splice(0)) rmSync(tree, { recursive: true, force: true });
});

/** A repository of one built package: packages/demo with src/ and dist/. */
function builtTree(): string {
  const root = mkdtempSync(join(tmpdir(), 'build-stamp-'));
  trees.push(root);
  writeFileSync(join(root, 'tsconfig.base.json'), '{}');
  const demo = join(root, 'packages', 'demo');
  mkdirSync(join(demo, 'src'), { recursive: true });
  mkdirSync(join(demo, 'dist'), { recursive: true });
  writeFileSync(join(demo, 'package.json'), '{"name":"demo"}');
  writeFileSync(join(demo, 'src', 'index.ts'), 'export const value = 1;\n');
  writeFileSync(join(demo, 'dist', 'index.js'), 'export const value = 1;\n');
  return root;
}

describe('the build stamp ([Note: build stamp])', () => {
  it('says dist only while the sources and builds on disk are the stamped ones', () => {
    const root = builtTree();
    expect(testRanksFrom({}, root)).toBe('source'); // never stamped
    writeStamp(root);
    expect(testRanksFrom({}, root)).toBe('dist');
    expect(testRanksFrom({ FSDP_TEST_RANKS: 'source' }, root)).toBe('source');
    // An edited source, not rebuilt: the processes must run the sources.
    writeFileSync(join(root, 'packages', 'demo', 'src', 'index.ts'), 'export const value = 2;\n');
    expect(testRanksFrom({}, root)).toBe('source');
    writeStamp(root);
    expect(testRanksFrom({}, root)).toBe('dist');
    // A build removed (or half-written): the sources again.
    rmSync(join(root, 'packages', 'demo', 'dist'), { recursive: true });
    expect(testRanksFrom({}, root)).toBe('source');
  });

  it('rejects an FSDP_TEST_RANKS it does not know, saying what it accepts', () => {
    expect(() => testRanksFrom({ FSDP_TEST_RANKS: 'build' }, builtTree())).toThrow(
      /FSDP_TEST_RANKS is 'build': expected 'source' or 'dist'/,
    );
  });
});
