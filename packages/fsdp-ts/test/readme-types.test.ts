import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { extractTypeScriptBlocks } from './readme-blocks';

// [Note: README type test]
// Every ```ts block of every package README must compile as a user compiles it: against the
// packages' built declarations (dist/*.d.ts, what npm ships), under `--strict --module nodenext`,
// with the set-up the umbrella README documents (`"types": ["node"]`, `skipLibCheck`). A block
// that continues an earlier one declares what it assumes in an HTML comment just above its fence
// (`<!-- prelude ... -->`), invisible on npm and GitHub. So a README example that stops compiling
// fails `npm test`. The guides under docs/ (every docs/**/*.md) are compiled the same way, in the
// same program.

const root = join(import.meta.dirname, '..', '..', '..');
const packagesDirectory = join(root, 'packages');
const require = createRequire(import.meta.url);
const tsc = require.resolve('typescript/bin/tsc');

/** Every Markdown file under `directory`, recursively, as paths relative to the repository root. */
function markdownFiles(directory: string): string[] {
  return readdirSync(join(root, directory), { withFileTypes: true })
    .flatMap((entry) => {
      const path = `${directory}/${entry.name}`;
      if (entry.isDirectory()) return markdownFiles(path);
      return entry.name.endsWith('.md') ? [path] : [];
    })
    .sort();
}

it('every package README and docs/ guide example compiles under --strict --module nodenext', async () => {
  const packages = readdirSync(packagesDirectory).filter((name) =>
    existsSync(join(packagesDirectory, name, 'README.md')),
  );
  const unbuilt = packages.filter((name) => !existsSync(join(packagesDirectory, name, 'dist', 'index.d.ts')));
  expect(unbuilt, 'the type test checks the built declarations: run `npm run build` first').toEqual([]);

  // Inside node_modules/.cache, so '@fsdp-ts/*' and '@tensorflow/tfjs-core' resolve as for an app.
  const directory = join(root, 'node_modules', '.cache', 'fsdp-ts', 'readme-types');
  rmSync(directory, { recursive: true, force: true });
  mkdirSync(directory, { recursive: true });
  const files: string[] = [];
  const documents = [
    { label: 'root', path: 'README.md' },
    ...packages.map((name) => ({ label: name, path: `packages/${name}/README.md` })),
    // docs/guides/first-training-script.md -> docs-guides-first-training-script
    ...markdownFiles('docs').map((path) => ({ label: path.replace(/\.md$/, '').replaceAll('/', '-'), path })),
  ];
  for (const { label, path } of documents) {
    const blocks = extractTypeScriptBlocks(readFileSync(join(root, path), 'utf8'));
    blocks.forEach((block, index) => {
      const file = `${label}-${index + 1}-line-${block.line}.mts`;
      // `export {}` makes every block a module, so top-level await and local names stay per block.
      writeFileSync(join(directory, file), `${block.prelude}\n${block.code}\nexport {};\n`);
      files.push(file);
    });
  }
  expect(files.length).toBeGreaterThan(10);
  writeFileSync(
    join(directory, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        types: ['node'],
        skipLibCheck: true,
        noEmit: true,
        noUnusedLocals: false,
      },
      files,
    }),
  );
  const result = await promisify(execFile)(process.execPath, [tsc, '-p', join(directory, 'tsconfig.json')], {
    cwd: directory,
  }).then(
    () => '',
    (error: { stdout?: string; message: string }) => error.stdout || error.message,
  );
  // Names the README, the block and the README line of every error (files are named after them).
  expect(result).toBe('');
});
