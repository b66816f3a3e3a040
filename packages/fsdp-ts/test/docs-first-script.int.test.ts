import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { expect, it } from 'vitest';
import { extractTypeScriptBlocks } from './readme-blocks';

// [Note: the first guide runs]
// docs/guides/first-training-script.md promises a script and what it prints. This test takes the
// guide's first ```ts block (the script) and its first ```text block (the output), runs the script
// under the repository's fsdp-run on 2 processes, and compares each rank's stdout lines, in order,
// with the guide's lines for that rank (the two ranks' lines interleave in any order).

const root = join(import.meta.dirname, '..', '..', '..');
const guide = join(root, 'docs', 'guides', 'first-training-script.md');
const launcher = join(
  dirname(createRequire(import.meta.url).resolve('@fsdp-ts/collectives/package.json')),
  'src/bin/fsdp-run.ts',
);

/** The lines of the first ```text block of a Markdown document. */
function firstTextBlock(markdown: string): string[] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((line) => /^```text\s*$/.test(line));
  const end = lines.findIndex((line, index) => index > start && line.startsWith('```'));
  return start < 0 || end < 0 ? [] : lines.slice(start + 1, end);
}

/** Lines prefixed `[rank R] `, grouped by R, each rank's in the order it printed them. */
function linesByRank(lines: string[]): Record<string, string[]> {
  const byRank: Record<string, string[]> = {};
  for (const line of lines) {
    const match = /^\[rank (\d+)\] (.*)$/.exec(line);
    if (match === null) continue;
    byRank[match[1]!] = [...(byRank[match[1]!] ?? []), match[2]!];
  }
  return byRank;
}

it('the first-script guide runs on 2 processes under fsdp-run and prints what the guide quotes', async () => {
  const markdown = readFileSync(guide, 'utf8');
  const [script] = extractTypeScriptBlocks(markdown);
  const expected = firstTextBlock(markdown);
  expect(script, 'the guide has a ```ts block').toBeDefined();
  expect(expected.length, 'the guide quotes its output in a ```text block').toBeGreaterThan(2);

  // Inside node_modules/.cache so that 'fsdp-ts', '@tensorflow/tfjs-core' and tsx resolve as in an
  // app; the script's checkpoints land there too.
  const directory = join(root, 'node_modules', '.cache', 'fsdp-ts', 'docs-first-script');
  rmSync(directory, { recursive: true, force: true });
  mkdirSync(directory, { recursive: true });
  writeFileSync(join(directory, 'train.mts'), `${script!.code}\n`);
  const child = spawn(
    process.execPath,
    [
      '--conditions=@fsdp-ts/source',
      '--import',
      'tsx',
      launcher,
      '--nproc-per-node',
      '2',
      join(directory, 'train.mts'),
    ],
    { cwd: directory, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    output += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const limit = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  clearTimeout(limit);
  try {
    expect(code, output).toBe(0);
    expect(linesByRank(stdout.split('\n'))).toEqual(linesByRank(expected));
    // The checkpoint the script says it saved is on disk, complete (metadata.json is written last).
    expect(() =>
      readFileSync(join(directory, 'checkpoints', 'step-00000030', 'metadata.json')),
    ).not.toThrow();
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
});
