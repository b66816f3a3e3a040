import { execFile } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { directorySize } from './directory-size';

// The published packages as a user installs them (architecture/decisions/2026-11-30-published-packages.md):
// `npm pack` every package, install the tarballs into a fresh app outside the repository (with
// tfjs-core as the documented peer), then use the app the way the READMEs say. Needs the npm
// registry (for tfjs-core, TypeScript, tsx) and a built repository (`npm test` builds first).

const root = join(import.meta.dirname, '..', '..', '..');
const run = promisify(execFile);
const minutes = 60_000;
const workspace = mkdtempSync(join(tmpdir(), 'fsdp-ts-installed-'));
const tarballs = join(workspace, 'tarballs');
const app = join(workspace, 'app');
const npmOptions = ['--no-audit', '--no-fund', '--loglevel=error'];

/** Runs a command; resolves with its exit code and output, whatever the code. */
async function outcome(command: string, args: string[], cwd: string, timeout = 5 * minutes) {
  return run(command, args, { cwd, timeout, maxBuffer: 64 * 1024 * 1024 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code?: number | string; stdout?: string; stderr?: string }) => ({
      code: typeof error.code === 'number' ? error.code : -1,
      stdout: error.stdout ?? '',
      stderr: error.stderr ?? String(error),
    }),
  );
}

async function succeed(command: string, args: string[], cwd: string, timeout?: number): Promise<string> {
  const result = await outcome(command, args, cwd, timeout);
  expect(result.code, `${command} ${args.join(' ')}\n${result.stdout}\n${result.stderr}`).toBe(0);
  return result.stdout;
}

afterAll(() => rmSync(workspace, { recursive: true, force: true }));

describe('the packed packages installed into a fresh app', () => {
  const publicPackages = readdirSync(join(root, 'packages'))
    .map((directory) => join(root, 'packages', directory))
    .filter((directory) => existsSync(join(directory, 'package.json')))
    .filter(
      (directory) => JSON.parse(readFileSync(join(directory, 'package.json'), 'utf8')).private !== true,
    );
  const tarballOf = new Map<string, string>();

  it(
    'packs every package and installs the tarballs with tfjs-core, TypeScript latest and 5.x',
    async () => {
      const unbuilt = publicPackages.filter((directory) => !existsSync(join(directory, 'dist', 'index.js')));
      expect(unbuilt, 'the packages are packed from their build: run `npm run build` first').toEqual([]);
      mkdirSync(tarballs, { recursive: true });
      const packed = JSON.parse(
        await succeed(
          'npm',
          [
            'pack',
            '--json',
            '--ignore-scripts',
            '--pack-destination',
            tarballs,
            ...publicPackages.flatMap((d) => ['-w', d]),
          ],
          root,
        ),
      ) as { name: string; filename: string; files: { path: string }[] }[];
      for (const { name, filename, files } of packed) {
        tarballOf.set(name, join(tarballs, filename));
        const paths = files.map((file) => file.path);
        expect(paths, name).toContain('LICENSE');
        expect(
          paths.filter((path) => path.endsWith('.map') || path.endsWith('.test.ts')),
          name,
        ).toEqual([]);
      }
      expect(packed.length).toBe(publicPackages.length);

      mkdirSync(app);
      writeFileSync(
        join(app, 'package.json'),
        JSON.stringify({ name: 'installed-app', private: true, type: 'module' }),
      );
      await succeed(
        'npm',
        [
          'install',
          ...npmOptions,
          ...tarballOf.values(),
          '@tensorflow/tfjs-core@^4.22.0',
          'typescript@latest',
          'typescript5@npm:typescript@5',
          '@types/node@20',
        ],
        app,
        10 * minutes,
      );
      // One tfjs-core for the whole app, and no @tensorflow/tfjs bundle.
      const tensorflow = readdirSync(join(app, 'node_modules', '@tensorflow'));
      expect(tensorflow).not.toContain('tfjs');
      const copies = (await succeed('npm', ['ls', '--all', '--parseable', '@tensorflow/tfjs-core'], app))
        .split('\n')
        .filter((line) => line.trim() !== '');
      expect(new Set(copies).size, copies.join('\n')).toBe(1);
    },
    15 * minutes,
  );

  it(
    'type-checks the seed scenario with the latest TypeScript and with TypeScript 5',
    async () => {
      copyFileSync(join(import.meta.dirname, 'installed-app', 'train.ts'), join(app, 'train.ts'));
      // The set-up the umbrella README documents under "Using from TypeScript".
      writeFileSync(
        join(app, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            target: 'es2022',
            module: 'nodenext',
            strict: true,
            types: ['node'],
            skipLibCheck: true,
            noEmit: true,
          },
          files: ['train.ts'],
        }),
      );
      for (const typescript of ['typescript', 'typescript5']) {
        const manifest = JSON.parse(
          readFileSync(join(app, 'node_modules', typescript, 'package.json'), 'utf8'),
        );
        const tsc = join(app, 'node_modules', typescript, manifest.bin.tsc);
        await succeed(process.execPath, [tsc, '-p', 'tsconfig.json'], app);
      }
    },
    5 * minutes,
  );

  it(
    'fsdp-run says in one line that a .ts script needs tsx, and that a script is missing',
    async () => {
      const fsdpRun = join(app, 'node_modules', '.bin', 'fsdp-run');
      const withoutTsx = await outcome(fsdpRun, ['--nproc-per-node', '2', 'train.ts'], app, 2 * minutes);
      expect(withoutTsx.code).not.toBe(0);
      expect(withoutTsx.stderr.trim().split('\n'), withoutTsx.stderr).toHaveLength(1);
      expect(withoutTsx.stderr).toContain('npm install --save-dev tsx');
      const missing = await outcome(fsdpRun, ['--nproc-per-node', '2', 'nothere.mjs'], app, 2 * minutes);
      expect(missing.code).not.toBe(0);
      expect(missing.stderr.trim().split('\n'), missing.stderr).toHaveLength(1);
      expect(missing.stderr).toContain('script not found');
    },
    5 * minutes,
  );

  it(
    'runs the seed scenario on 2 ranks under fsdp-run, from ESM, after `npm i -D tsx`',
    async () => {
      await succeed('npm', ['install', '--save-dev', ...npmOptions, 'tsx'], app, 5 * minutes);
      const output = await succeed(
        join(app, 'node_modules', '.bin', 'fsdp-run'),
        ['--nproc-per-node', '2', 'train.ts'],
        app,
        5 * minutes,
      );
      const results = output
        .split('\n')
        .filter((line) => line.includes('result {'))
        .map((line) => JSON.parse(line.slice(line.indexOf('{'))))
        .sort((a, b) => a.rank - b.rank);
      expect(results.map((result) => result.rank)).toEqual([0, 1]);
      for (const result of results) {
        expect(result.sameParameters).toBe(true);
        expect(result.headUnchanged).toBe(true);
        expect(result.umbrellaIsSame).toBe(true);
      }
      // The gradient is the average over both ranks, so the loss averaged over the ranks falls;
      // one rank's own loss may rise.
      const mean = (at: (losses: number[]) => number) =>
        results.reduce((sum, result) => sum + at(result.losses), 0) / results.length;
      expect(mean((losses) => losses.at(-1)!)).toBeLessThan(mean((losses) => losses[0]!));
    },
    6 * minutes,
  );

  it(
    'loads from CommonJS too, as the same objects as the ESM build of the umbrella',
    async () => {
      writeFileSync(
        join(app, 'check.cjs'),
        [
          "const umbrella = require('fsdp-ts');",
          "const fsdp = require('@fsdp-ts/fsdp');",
          "if (typeof umbrella.FullyShardedDataParallel !== 'function') throw new Error('no FullyShardedDataParallel');",
          "if (umbrella.FullyShardedDataParallel !== fsdp.FullyShardedDataParallel) throw new Error('two copies');",
          "console.log('cjs ok', Object.keys(umbrella).length);",
        ].join('\n'),
      );
      expect(await succeed(process.execPath, ['check.cjs'], app)).toMatch(/^cjs ok \d+/);
    },
    2 * minutes,
  );

  it(
    'installs @fsdp-ts/tensor alone in at most 80 MB',
    async () => {
      const alone = join(workspace, 'tensor-alone');
      mkdirSync(alone);
      writeFileSync(join(alone, 'package.json'), JSON.stringify({ name: 'tensor-alone', private: true }));
      await succeed(
        'npm',
        // With its one project dependency, the error base (not on the registry before a release).
        ['install', ...npmOptions, tarballOf.get('@fsdp-ts/tensor')!, tarballOf.get('@fsdp-ts/errors')!],
        alone,
        10 * minutes,
      );
      // tfjs-core comes in as the (auto-installed) peer; the size is what `du --apparent-size` says.
      expect(existsSync(join(alone, 'node_modules', '@tensorflow', 'tfjs-core'))).toBe(true);
      const megabytes = directorySize(join(alone, 'node_modules')) / 1e6;
      console.log(`fresh install of @fsdp-ts/tensor: ${megabytes.toFixed(1)} MB`);
      expect(megabytes).toBeLessThanOrEqual(80);
    },
    10 * minutes,
  );
  it(
    'names the two copies of @fsdp-ts/tensor when ESM and CommonJS builds are mixed',
    async () => {
      writeFileSync(
        join(app, 'mixed.mjs'),
        [
          "import { createRequire } from 'node:module';",
          "import { SGD } from '@fsdp-ts/optim';",
          "const { Parameter } = createRequire(import.meta.url)('@fsdp-ts/tensor');",
          'try {',
          '  new SGD([Parameter.fromArray([1, 2], [2])], { lr: 0.1 });',
          "  console.log('no error');",
          '} catch (error) {',
          '  console.log(error.message);',
          '}',
        ].join('\n'),
      );
      const message = await succeed(process.execPath, ['mixed.mjs'], app);
      expect(message).toContain('another copy of @fsdp-ts/tensor (2 copies loaded');
      expect(message).toContain('index.cjs');
      expect(message).not.toContain('is not a { params');
    },
    2 * minutes,
  );
});
