import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const packageRoot = join(import.meta.dirname, '..');
const repositoryRoot = join(packageRoot, '..', '..');
// Inside node_modules/.cache, so '@fsdp-ts/*' resolve as for an app (through the source condition).
const directory = join(repositoryRoot, 'node_modules', '.cache', 'fsdp-ts', 'checkpoint-readme');
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** The README's first ```ts block, as written. */
function exampleBlock(): string {
  const readme = readFileSync(join(packageRoot, 'README.md'), 'utf8');
  const match = /\n```ts\n([\s\S]*?)\n```\n/.exec(readme);
  if (match === null) throw new Error('README.md has no ```ts block');
  return match[1]!;
}

describe('README example', () => {
  it('runs as written, alone, and prints what its comment says', async () => {
    const code = exampleBlock();
    const expected = /console\.log\(.*\); \/\/ (.*)$/m.exec(code)?.[1];
    expect(expected).toBeDefined();
    mkdirSync(directory, { recursive: true });
    const file = join(directory, 'example.mts');
    writeFileSync(file, `${code}\nexport {};\n`);
    // Alone: no launcher variables, so initProcessGroup makes a one-process group.
    const { RANK: _rank, WORLD_SIZE: _worldSize, ...environment } = process.env;
    const { stdout } = await run(
      process.execPath,
      ['--conditions=@fsdp-ts/source', '--import', 'tsx', file],
      {
        cwd: directory,
        timeout: 120_000,
        env: { ...environment, NO_COLOR: '1' },
      },
    );
    const printed = stdout.trim().split('\n').at(-1);
    expect(printed).toBe(expected);
  }, 150_000);
});
