import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fsdpRunArguments } from '../../collectives/test/helpers/rank-commands';
import { extractTypeScriptBlocks } from './readme-blocks';

// [Note: the guides' scripts run]
// A guide promises a script and what it prints. For the guides below, this test takes the guide's
// first ```ts block (its script) and its first ```text block (what it prints), runs the script
// under the repository's fsdp-run on the guide's number of processes, and compares each rank's
// stdout lines, in order, with the guide's lines for that rank (ranks interleave in any order).
// The checkpoints guide resumes, on 3 processes, from the checkpoint the first guide's script
// saved on 2, so the two run in order in one directory; the PyTorch and layers guides' on 2.

const root = join(import.meta.dirname, '..', '..', '..');
// Inside node_modules/.cache so that 'fsdp-ts', '@tensorflow/tfjs-core' and tsx resolve as in an
// app; the scripts' checkpoints land there too.
const directory = join(root, 'node_modules', '.cache', 'fsdp-ts', 'docs-guide-scripts');

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

/** Runs the guide's script on `processes` ranks; resolves with its exit code, stdout and all output. */
async function runGuideScript(guide: string, processes: number) {
  const markdown = readFileSync(join(root, guide), 'utf8');
  const [script] = extractTypeScriptBlocks(markdown);
  const expected = firstTextBlock(markdown);
  expect(script, `${guide} has a \`\`\`ts block`).toBeDefined();
  expect(expected.length, `${guide} quotes its output in a \`\`\`text block`).toBeGreaterThan(0);
  const file = join(directory, guide.replaceAll('/', '-').replace(/\.md$/, '.mts'));
  writeFileSync(file, `${script!.code}\n`);
  const child = spawn(
    process.execPath,
    [...fsdpRunArguments(), '--nproc-per-node', String(processes), file],
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
  return { code, output, printed: linesByRank(stdout.split('\n')), expected: linesByRank(expected) };
}

describe('the guides’ scripts print what the guides quote', () => {
  beforeAll(() => {
    rmSync(directory, { recursive: true, force: true });
    mkdirSync(directory, { recursive: true });
  });
  afterAll(() => rmSync(directory, { recursive: true, force: true }));

  it('docs/guides/first-training-script.md on 2 processes', async () => {
    const run = await runGuideScript('docs/guides/first-training-script.md', 2);
    expect(run.code, run.output).toBe(0);
    expect(run.printed).toEqual(run.expected);
    // The checkpoint it says it saved is complete (metadata.json is written last).
    expect(existsSync(join(directory, 'checkpoints', 'step-00000030', 'metadata.json'))).toBe(true);
  });

  it('docs/guides/checkpoints-and-resuming.md on 3 processes, from the 2-process checkpoint', async () => {
    const run = await runGuideScript('docs/guides/checkpoints-and-resuming.md', 3);
    expect(run.code, run.output).toBe(0);
    expect(run.printed).toEqual(run.expected);
    expect(existsSync(join(directory, 'checkpoints', 'step-00000040', 'metadata.json'))).toBe(true);
    expect(existsSync(join(directory, 'model.safetensors'))).toBe(true);
  });

  it('docs/guides/from-pytorch-fsdp.md on 2 processes', async () => {
    const run = await runGuideScript('docs/guides/from-pytorch-fsdp.md', 2);
    expect(run.code, run.output).toBe(0);
    expect(run.printed).toEqual(run.expected);
  });

  it('docs/guides/layers-model.md on 2 processes', async () => {
    const run = await runGuideScript('docs/guides/layers-model.md', 2);
    expect(run.code, run.output).toBe(0);
    expect(run.printed).toEqual(run.expected);
    expect(existsSync(join(directory, 'model', 'model.json'))).toBe(true);
  });
});
