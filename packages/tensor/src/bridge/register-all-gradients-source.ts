// Source-mode stand-in for register-all-gradients.ts (see [Note: gradient registration]): tests and
// tsx-run scripts load the package from source, where nothing has bundled tfjs-core's gradient
// registration yet. Bundle it once with esbuild (as the build does) into node_modules/.cache and
// import that. Concurrent processes each write a private file and rename it into place.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { buildSync, version as esbuildVersion } from 'esbuild';

const require = createRequire(import.meta.url);
const corePackageJson = require.resolve('@tensorflow/tfjs-core/package.json');
const coreVersion = (JSON.parse(readFileSync(corePackageJson, 'utf8')) as { version: string }).version;
// <node_modules>/@tensorflow/tfjs-core/package.json → <node_modules>/.cache/fsdp-ts
const cacheDirectory = join(dirname(corePackageJson), '..', '..', '.cache', 'fsdp-ts');
const registrations = [
  '@tensorflow/tfjs-core/dist/register_all_gradients.js',
  '@tensorflow/tfjs-core/dist/public/chained_ops/register_all_chained_ops.js',
];
const bundle = join(cacheDirectory, `register-all-gradients-${coreVersion}-${esbuildVersion}.mjs`);

if (!existsSync(bundle)) {
  mkdirSync(cacheDirectory, { recursive: true });
  const temporary = `${bundle}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    buildSync({
      stdin: {
        contents: registrations.map((path) => `import ${JSON.stringify(require.resolve(path))};`).join('\n'),
        resolveDir: cacheDirectory,
      },
      bundle: true,
      format: 'esm',
      platform: 'node',
      outfile: temporary,
      logLevel: 'error',
    });
    renameSync(temporary, bundle);
  } finally {
    rmSync(temporary, { force: true });
  }
}

await import(pathToFileURL(bundle).href);
