import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { brokenLinks, markdownAnchors, markdownFilesUnder } from './markdown-links';

// See [Note: link check] in markdown-links.ts.

const root = join(import.meta.dirname, '..', '..', '..');
const readmes = (directory: string) =>
  readdirSync(join(root, directory))
    .map((name) => `${directory}/${name}/README.md`)
    .filter((path) => existsSync(join(root, path)))
    .sort();
const describeBroken = (links: ReturnType<typeof brokenLinks>) =>
  links.map(({ file, line, target, reason }) => `${file}:${line}: (${target}): ${reason}`);

describe('relative links and anchors resolve', () => {
  it('in README.md, CONTRIBUTING.md, docs/, packages/*/README.md and examples/*/README.md', () => {
    const files = [
      'README.md',
      'CONTRIBUTING.md',
      ...markdownFilesUnder(root, 'docs'),
      ...readmes('packages'),
      ...readmes('examples'),
    ].filter((path) => existsSync(join(root, path)));
    expect(files.length).toBeGreaterThan(10);
    expect(describeBroken(brokenLinks(root, files))).toEqual([]);
  });

  it('in architecture/', () => {
    const files = markdownFilesUnder(root, 'architecture');
    expect(files.length).toBeGreaterThan(0);
    expect(describeBroken(brokenLinks(root, files))).toEqual([]);
  });
});

describe('the link check itself', () => {
  it('slugs headings as GitHub does', () => {
    const anchors = markdownAnchors(
      [
        '# Checkpoints and resuming',
        '## `fsdp-run --nnodes MIN:MAX`',
        '## At scale (`npm run bench:scale`)',
        '## Checkpoints and resuming',
        '```sh',
        '# not a heading',
        '```',
        '<a id="explicit"></a>',
      ].join('\n'),
    );
    expect([...anchors].sort()).toEqual(
      [
        'checkpoints-and-resuming',
        'fsdp-run---nnodes-minmax',
        'at-scale-npm-run-benchscale',
        'checkpoints-and-resuming-1',
        'explicit',
      ].sort(),
    );
  });

  it('reports a missing file, a missing anchor and a missing same-file anchor, and nothing else', () => {
    const directory = mkdtempSync(join(tmpdir(), 'fsdp-link-check-'));
    try {
      mkdirSync(join(directory, 'docs'));
      writeFileSync(join(directory, 'docs', 'target.md'), '# A heading\n\n## Second one\n');
      writeFileSync(
        join(directory, 'docs', 'source.md'),
        [
          '# Source',
          '[fine](target.md#second-one) [fine too](./target.md) [dir](../docs) [web](https://example.com/x#y)',
          '[gone](missing.md)',
          '[no such heading](target.md#third-one)',
          '[here](#source) [not here](#nowhere)',
          '`[in code](missing-in-code.md)`',
          '```md',
          '[in a block](missing-in-block.md)',
          '```',
          '[ref]: ../docs/target.md#a-heading',
          '[bad ref]: nothing.md',
        ].join('\n'),
      );
      expect(describeBroken(brokenLinks(directory, ['docs/source.md']))).toEqual([
        'docs/source.md:3: (missing.md): docs/missing.md does not exist',
        'docs/source.md:4: (target.md#third-one): docs/target.md has no heading whose anchor is #third-one',
        'docs/source.md:5: (#nowhere): docs/source.md has no heading whose anchor is #nowhere',
        'docs/source.md:11: (nothing.md): docs/nothing.md does not exist',
      ]);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});
