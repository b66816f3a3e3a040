import { execFile } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { directorySize } from './directory-size';
import { listedRuntimeNames, readPublicExports } from './public-exports';
import { sectionBlocks, shellCommands } from './readme-blocks';
import { type LocalRegistry, npmEnvironment, startLocalRegistry } from './registry/local-registry';

// The packages as a user gets them (architecture/decisions/2026-11-30-published-packages.md):
// 1. a throwaway copy of this working tree as a fresh clone has it (tracked and untracked files,
//    no dist/, its own `npm ci`), where `npx fsdp-run` must run from source without the registry;
// 2. the release path there: `changeset version`, then `changeset publish` to a real npm registry
//    on 127.0.0.1 ([Note: the test registry]); each package is built by its prepack, or is the
//    suite's own build of the same sources ([Note: the registry test reuses the suite's builds]);
// 3. the root README's Install lines in a fresh `npm init -y` app outside the repository, against
//    that registry (which proxies third-party packages to npm); the README's first script
//    type-checked under --strict and run with its command on 2 processes, printing the README's
//    output; the same packages from CommonJS; a CommonJS app told the one-line fix; and
//    @fsdp-ts/tensor alone within its size budget.

const root = join(import.meta.dirname, '..', '..', '..');
const run = promisify(execFile);
const minutes = 60_000;
const workspace = mkdtempSync(join(tmpdir(), 'fsdp-ts-installed-'));
const clone = join(workspace, 'clone');
const app = join(workspace, 'app');
const commonjsApp = join(workspace, 'commonjs-app');
const tensorAlone = join(workspace, 'tensor-alone');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const installBlock = sectionBlocks(readme, 'Install')[0]!;
const [scriptBlock, commandBlock, outputBlock] = sectionBlocks(readme, 'Your first training script');
let registry: LocalRegistry | undefined;

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command; resolves with its exit code and output, whatever the code. */
async function outcome(
  command: string,
  args: string[],
  cwd: string,
  environment: NodeJS.ProcessEnv,
  timeout = 5 * minutes,
): Promise<Outcome> {
  return run(command, args, { cwd, env: environment, timeout, maxBuffer: 64 * 1024 * 1024 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code?: number | string; stdout?: string; stderr?: string }) => ({
      code: typeof error.code === 'number' ? error.code : -1,
      stdout: error.stdout ?? '',
      stderr: error.stderr ?? String(error),
    }),
  );
}

async function succeed(
  command: string,
  args: string[],
  cwd: string,
  environment: NodeJS.ProcessEnv,
  timeout?: number,
): Promise<string> {
  const result = await outcome(command, args, cwd, environment, timeout);
  expect(result.code, `${command} ${args.join(' ')} in ${cwd}\n${result.stdout}\n${result.stderr}`).toBe(0);
  return result.stdout;
}

/** A command line from a README, run by the shell in `cwd` against the test registry. */
function shell(line: string, cwd: string, timeout?: number): Promise<Outcome> {
  return outcome('sh', ['-c', line], cwd, registry!.environment, timeout);
}

async function shellSucceeds(line: string, cwd: string, timeout?: number): Promise<string> {
  const result = await shell(line, cwd, timeout);
  expect(result.code, `${line} in ${cwd}\n${result.stdout}\n${result.stderr}`).toBe(0);
  return result.stdout;
}

/**
 * The files of this working tree a fresh clone would have: tracked and untracked, not ignored
 * (git's list; without git, everything but what .gitignore names, as release-dry copies).
 */
async function copyWorkingTree(destination: string): Promise<void> {
  const listed = await run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: root,
    maxBuffer: 64 * 1024 * 1024,
  }).then(
    ({ stdout }) => stdout.split('\0').filter((path) => path !== ''),
    () => undefined,
  );
  if (listed === undefined) {
    const ignored = new Set(['node_modules', '.git', 'dist', '.turbo', 'bench-results', 'output', 'tmp']);
    cpSync(root, destination, { recursive: true, filter: (source) => !ignored.has(basename(source)) });
    return;
  }
  for (const path of new Set(listed)) {
    const source = join(root, path);
    if (!existsSync(source) || !statSync(source).isFile()) continue; // deleted, not yet committed
    mkdirSync(dirname(join(destination, path)), { recursive: true });
    copyFileSync(source, join(destination, path));
  }
}

const publicPackages = readdirSync(join(root, 'packages'))
  .filter((directory) => existsSync(join(root, 'packages', directory, 'package.json')))
  .map((directory) => JSON.parse(readFileSync(join(root, 'packages', directory, 'package.json'), 'utf8')))
  .filter((manifest) => manifest.private !== true)
  .map((manifest) => manifest.name as string)
  .sort();

/**
 * Starts `make` the first time it is called and hands every caller the same promise. A fixture
 * started ahead of the test that needs it (marked handled, so a failure is reported by that test,
 * not as an unhandled rejection).
 */
function once<T>(make: () => Promise<T>): () => Promise<T> {
  let promise: Promise<T> | undefined;
  return () => {
    if (promise === undefined) {
      promise = make();
      promise.catch(() => {});
      startedFixtures.push(promise);
    }
    return promise;
  };
}
/** Every fixture started, so that the workspace is removed only once none still writes to it. */
const startedFixtures: Promise<unknown>[] = [];

// [Note: installed-app schedule] The registry (Verdaccio's own `npm ci` on a fresh clone, then
// its start) is needed only from the publish on, so it starts while the fresh clone is copied and
// installed; the CommonJS app and @fsdp-ts/tensor alone are installed while the README's app is
// installed, checked and run. Every step and assertion is the one it was when they ran one after
// the other: the installs are into their own directories, and npm's cache takes concurrent use.
const localRegistry = once(async () => {
  const uplink = (await succeed('npm', ['config', 'get', 'registry'], workspace, npmEnvironment())).trim();
  registry = await startLocalRegistry(join(workspace, 'registry'), uplink);
  return registry;
});

/** The CommonJS app: `npm init -y` left CommonJS, then the README's first Install line. */
const commonjsAppInstalled = once(async () => {
  mkdirSync(commonjsApp);
  await shellSucceeds('npm init -y', commonjsApp);
  expect(JSON.parse(readFileSync(join(commonjsApp, 'package.json'), 'utf8')).type).toBe('commonjs');
  await shellSucceeds(shellCommands(installBlock.code)[0]!, commonjsApp, 10 * minutes);
});

/** `npm install @fsdp-ts/tensor` alone into an `npm init -y` app. */
const tensorAloneInstalled = once(async () => {
  mkdirSync(tensorAlone);
  await shellSucceeds('npm init -y', tensorAlone);
  await shellSucceeds('npm install @fsdp-ts/tensor', tensorAlone, 10 * minutes);
});

beforeAll(() => {
  void localRegistry();
});

afterAll(async () => {
  await Promise.allSettled(startedFixtures);
  await localRegistry().then(
    (started) => started.stop(),
    () => {},
  );
  rmSync(workspace, { recursive: true, force: true });
});

describe('a fresh clone of the repository', () => {
  it(
    'a fresh clone: `npm ci` links fsdp-run, which runs from source, without the registry',
    async () => {
      await copyWorkingTree(clone);
      expect(existsSync(join(clone, 'packages', 'collectives', 'dist'))).toBe(false);
      await succeed(
        'npm',
        ['ci', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'],
        clone,
        npmEnvironment(),
        10 * minutes,
      );
      writeFileSync(
        join(clone, 'fresh-clone-check.ts'),
        [
          "import { initProcessGroup } from '@fsdp-ts/collectives';",
          'const group = await initProcessGroup();',
          'const values = new Float32Array([group.rank + 1]);',
          'await group.allReduce(values);',
          'console.log("fresh clone: rank " + group.rank + " of " + group.size + ": sum " + values[0]);',
          'await group.destroy();',
        ].join('\n'),
      );
      // --offline: were the bin not linked, npx would have to fetch a package named fsdp-run.
      const output = await succeed(
        'npx',
        ['--offline', 'fsdp-run', '--nproc-per-node', '2', 'fresh-clone-check.ts'],
        clone,
        npmEnvironment(),
        5 * minutes,
      );
      expect(output).toContain('fresh clone: rank 0 of 2: sum 3');
      expect(output).toContain('fresh clone: rank 1 of 2: sum 3');
      // Still unbuilt: the launcher and the ranks ran the TypeScript sources.
      expect(existsSync(join(clone, 'packages', 'collectives', 'dist'))).toBe(false);
    },
    15 * minutes,
  );
});

/**
 * [Note: the registry test reuses the suite's builds] A package's prepack runs its `npm run
 * build`, which the root `npm run build` has just run for every package through turbo. When the
 * root's build stamp says those builds are the builds of these sources ([Note: build stamp]:
 * vitest then runs ranks from dist/, FSDP_TEST_RANKS=dist), their bytes are what each prepack
 * here would write again (tsup keeps project packages external and embeds no version), so those
 * packages get a copy of their dist/ and, in this throwaway clone only, no prepack. Two always
 * build through their prepack, so the release's own build stays tested: @fsdp-ts/errors, and
 * @fsdp-ts/collectives, whose build script cleans dist/, copies its CommonJS declarations and
 * reads its project dependencies' types from their sources, as a release's prepack does. Without
 * a matching stamp every package builds through its prepack. Returns the directories reused.
 */
const BUILT_BY_PREPACK = ['@fsdp-ts/errors', '@fsdp-ts/collectives'];

function reuseSuiteBuilds(): string[] {
  if (process.env.FSDP_TEST_RANKS !== 'dist') return [];
  const reused: string[] = [];
  for (const directory of readdirSync(join(clone, 'packages'))) {
    const manifestPath = join(clone, 'packages', directory, 'package.json');
    if (!existsSync(manifestPath)) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
    if (manifest.private === true || BUILT_BY_PREPACK.includes(manifest.name)) continue;
    expect(manifest.scripts?.prepack, manifest.name).toBe('npm run build');
    cpSync(join(root, 'packages', directory, 'dist'), join(clone, 'packages', directory, 'dist'), {
      recursive: true,
    });
    delete manifest.scripts.prepack;
    writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
    reused.push(directory);
  }
  return reused;
}

describe('the packages published to a local registry and installed into fresh apps', () => {
  beforeAll(async () => {
    await localRegistry();
  }, 10 * minutes);

  it(
    "publishes every public package through changesets (version, publish), built by its prepack or by the suite's own build of the same sources",
    async () => {
      const changeset = join(clone, 'node_modules', '@changesets', 'cli', 'bin.js');
      await succeed(process.execPath, [changeset, 'version'], clone, npmEnvironment());
      const versions = new Map<string, string>();
      for (const directory of readdirSync(join(clone, 'packages'))) {
        const manifestPath = join(clone, 'packages', directory, 'package.json');
        if (!existsSync(manifestPath)) continue;
        const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
        if (manifest.private !== true) versions.set(manifest.name, manifest.version);
      }
      expect([...versions.keys()].sort()).toEqual(publicPackages);
      const reused = reuseSuiteBuilds();
      for (const directory of ['errors', 'collectives'])
        expect(existsSync(join(clone, 'packages', directory, 'dist')), directory).toBe(false);
      await succeed(
        process.execPath,
        [changeset, 'publish', '--no-git-tag'],
        clone,
        registry!.environment,
        15 * minutes,
      );
      for (const [name, version] of versions) {
        const published = JSON.parse(
          await succeed(
            'npm',
            ['view', `${name}@${version}`, 'version', '--json'],
            workspace,
            registry!.environment,
          ),
        );
        expect(published, name).toBe(version);
      }
      // Built by their prepacks (the app installs below check every package's dist/).
      expect(existsSync(join(clone, 'packages', 'errors', 'dist', 'index.js'))).toBe(true);
      expect(existsSync(join(clone, 'packages', 'collectives', 'dist', 'index.d.cts'))).toBe(true);
      expect(reused).toHaveLength(
        process.env.FSDP_TEST_RANKS === 'dist' ? publicPackages.length - BUILT_BY_PREPACK.length : 0,
      );
    },
    20 * minutes,
  );

  it(
    "installs with the README's Install lines into an `npm init -y` app: one tfjs-core, complete packages",
    async () => {
      // The other two apps install meanwhile ([Note: installed-app schedule]).
      void commonjsAppInstalled();
      void tensorAloneInstalled();
      mkdirSync(app);
      await shellSucceeds('npm init -y', app);
      const commands = shellCommands(installBlock.code);
      expect(commands[0]).toMatch(/^npm install fsdp-ts /);
      for (const command of commands) await shellSucceeds(command, app, 10 * minutes);
      // TypeScript 5 beside the latest the README installs (the umbrella README's "Using from TypeScript").
      await shellSucceeds('npm install --save-dev typescript5@npm:typescript@5', app, 10 * minutes);
      const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8'));
      expect(manifest.type).toBe('module');
      // One tfjs-core for the whole app, and no @tensorflow/tfjs bundle.
      expect(readdirSync(join(app, 'node_modules', '@tensorflow'))).not.toContain('tfjs');
      const copies = (
        await succeed(
          'npm',
          ['ls', '--all', '--parseable', '@tensorflow/tfjs-core'],
          app,
          registry!.environment,
        )
      )
        .split('\n')
        .filter((line) => line.trim() !== '');
      expect(new Set(copies).size, copies.join('\n')).toBe(1);
      // The installed fsdp-run runs the build ([Note: fsdp-run bin entry]), not the shipped source.
      expect(
        existsSync(join(app, 'node_modules', '@fsdp-ts', 'collectives', 'dist', 'bin', 'fsdp-run.js')),
      ).toBe(true);
      // Every project package came from the registry, built: dist/, LICENSE, no maps, no tests.
      for (const name of publicPackages.filter((name) => name !== '@fsdp-ts/layers')) {
        const directory = join(app, 'node_modules', name);
        expect(existsSync(join(directory, 'dist', 'index.js')), name).toBe(true);
        expect(existsSync(join(directory, 'LICENSE')), name).toBe(true);
        const files = readdirSync(directory, { recursive: true }).map(String);
        expect(
          files.filter((file) => file.endsWith('.map') || file.endsWith('.test.ts')),
          name,
        ).toEqual([]);
      }
    },
    20 * minutes,
  );

  it(
    "type-checks the README's first script under --strict with the latest TypeScript and with TypeScript 5",
    async () => {
      expect(scriptBlock?.language).toBe('ts');
      expect(scriptBlock!.code.split('\n').length).toBeLessThanOrEqual(30);
      writeFileSync(join(app, 'train.ts'), `${scriptBlock!.code}\n`);
      // The tsconfig.json the umbrella README documents under "Using from TypeScript".
      const umbrellaReadme = readFileSync(join(root, 'packages', 'fsdp-ts', 'README.md'), 'utf8');
      const documented = sectionBlocks(umbrellaReadme, 'Using from TypeScript').find(
        (block) => block.language === 'json',
      )!;
      const tsconfig = JSON.parse(documented.code);
      expect(tsconfig.compilerOptions.strict).toBe(true);
      tsconfig.compilerOptions.noEmit = true;
      writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ ...tsconfig, files: ['train.ts'] }));
      // The two compilers at once: each only reads the app.
      await Promise.all(
        ['typescript', 'typescript5'].map((typescript) => {
          const manifest = JSON.parse(
            readFileSync(join(app, 'node_modules', typescript, 'package.json'), 'utf8'),
          );
          const tsc = join(app, 'node_modules', typescript, manifest.bin.tsc);
          return succeed(process.execPath, [tsc, '-p', 'tsconfig.json'], app, registry!.environment);
        }),
      );
    },
    5 * minutes,
  );

  it(
    "runs the README's command on 2 processes with the installed fsdp-run and prints the README's output",
    async () => {
      expect(commandBlock?.language).toBe('sh');
      const [command] = shellCommands(commandBlock!.code);
      expect(command).toBe('npx fsdp-run --nproc-per-node 2 train.ts');
      const output = await shellSucceeds(command!, app, 5 * minutes);
      expect(outputBlock?.language).toBe('text');
      expect(output.trimEnd()).toBe(outputBlock!.code.trimEnd());
      expect(existsSync(join(app, 'checkpoints', 'step-00000010', 'metadata.json'))).toBe(true);
    },
    6 * minutes,
  );

  it(
    'loads from CommonJS and ESM, the umbrella re-exporting the same objects as the packages',
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
      expect(await succeed(process.execPath, ['check.cjs'], app, registry!.environment)).toMatch(
        /^cjs ok \d+/,
      );
      writeFileSync(
        join(app, 'check.mjs'),
        [
          "import * as umbrella from 'fsdp-ts';",
          "import { FullyShardedDataParallel } from '@fsdp-ts/fsdp';",
          "if (umbrella.FullyShardedDataParallel !== FullyShardedDataParallel) throw new Error('two copies');",
          "console.log('esm ok');",
        ].join('\n'),
      );
      expect(await succeed(process.execPath, ['check.mjs'], app, registry!.environment)).toBe('esm ok\n');
    },
    2 * minutes,
  );

  it(
    'every installed entry point exports, from ESM and from CommonJS, exactly what public-exports.txt lists',
    async () => {
      // [Note: public exports list] in ./public-exports.ts; @fsdp-ts/layers is not installed here.
      const listed = new Map(
        [...readPublicExports()]
          .filter(([entry]) => !entry.startsWith('@fsdp-ts/layers'))
          .map(([entry, lines]) => [entry, listedRuntimeNames(lines)]),
      );
      const entries = JSON.stringify([...listed.keys()]);
      const names = (module: string) =>
        `Object.keys(${module}).filter((name) => name !== 'default' && name !== '__esModule').sort()`;
      writeFileSync(
        join(app, 'surfaces.mjs'),
        [
          "import { createRequire } from 'node:module';",
          'const require = createRequire(import.meta.url);',
          'const surfaces = {};',
          `for (const entry of ${entries}) {`,
          `  surfaces[entry] = { esm: ${names('await import(entry)')}, cjs: ${names('require(entry)')} };`,
          '}',
          'console.log(JSON.stringify(surfaces));',
        ].join('\n'),
      );
      const surfaces = JSON.parse(
        await succeed(process.execPath, ['surfaces.mjs'], app, registry!.environment),
      ) as Record<string, { esm: string[]; cjs: string[] }>;
      for (const [entry, expected] of listed) {
        expect(surfaces[entry]?.esm, `${entry} (import)`).toEqual(expected);
        expect(surfaces[entry]?.cjs, `${entry} (require)`).toEqual(expected);
      }
    },
    2 * minutes,
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
      const message = await succeed(process.execPath, ['mixed.mjs'], app, registry!.environment);
      expect(message).toContain('another copy of @fsdp-ts/tensor (2 copies loaded');
      // The CommonJS copy, named by the file it runs from: its index or, as tensor's two entries share
      // chunks (architecture/decisions/2026-12-02-public-surfaces.md), a chunk of its dist/.
      expect(message).toMatch(/@fsdp-ts\/tensor\/dist\/[\w-]+\.cjs/);
      expect(message).not.toContain('is not a { params');
    },
    2 * minutes,
  );

  it(
    'a CommonJS app (`npm init -y`): fsdp-run says in one line to install tsx, then to set "type": "module"',
    async () => {
      await commonjsAppInstalled();
      writeFileSync(join(commonjsApp, 'train.ts'), `${scriptBlock!.code}\n`);
      const command = shellCommands(commandBlock!.code)[0]!;

      const missing = await shell('npx fsdp-run --nproc-per-node 2 nothere.mjs', commonjsApp, 2 * minutes);
      expect(missing.code).not.toBe(0);
      expect(missing.stderr.trim().split('\n'), missing.stderr).toHaveLength(1);
      expect(missing.stderr).toContain('script not found');

      const withoutTsx = await shell(command, commonjsApp, 2 * minutes);
      expect(withoutTsx.code).not.toBe(0);
      expect(withoutTsx.stderr.trim().split('\n'), withoutTsx.stderr).toHaveLength(1);
      expect(withoutTsx.stderr).toContain('npm install --save-dev tsx');

      await shellSucceeds('npm install --save-dev tsx', commonjsApp, 5 * minutes);
      const commonjs = await shell(command, commonjsApp, 2 * minutes);
      expect(commonjs.code).not.toBe(0);
      expect(commonjs.stderr.trim().split('\n'), commonjs.stderr).toHaveLength(1);
      expect(commonjs.stderr).toContain('top-level await');
      expect(commonjs.stderr).toContain('"type": "commonjs"');
      expect(commonjs.stderr).toContain('npm pkg set type=module');
    },
    15 * minutes,
  );

  it(
    'installs @fsdp-ts/tensor alone in at most 80 MB',
    async () => {
      await tensorAloneInstalled();
      // tfjs-core comes in as the (auto-installed) peer; the size is what `du --apparent-size` says.
      expect(existsSync(join(tensorAlone, 'node_modules', '@tensorflow', 'tfjs-core'))).toBe(true);
      const megabytes = directorySize(join(tensorAlone, 'node_modules')) / 1e6;
      console.log(`fresh install of @fsdp-ts/tensor: ${megabytes.toFixed(1)} MB`);
      expect(megabytes).toBeLessThanOrEqual(80);
    },
    10 * minutes,
  );
});
