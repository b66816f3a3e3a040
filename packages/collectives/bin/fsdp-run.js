#!/usr/bin/env node
// [Note: fsdp-run bin entry]
// npm links a package's bin only if the file exists when it installs: in a fresh clone `npm ci`
// runs before any build, so a bin pointing into dist/ would not be linked, and `npx fsdp-run`
// would ask the registry for some other package of that name. This committed file is the bin
// instead. Installed from the registry (and in a built clone) it runs the build,
// dist/bin/fsdp-run.js, with plain node; in an unbuilt clone it runs the TypeScript source
// through the workspace's tsx, resolving the workspace's packages (@fsdp-ts/errors) to their
// source too (the `@fsdp-ts/source` export condition, added by a resolve hook: the process has
// started already, so `--conditions` cannot be passed), and the launcher then starts ranks from
// source (launcherRunsFromSource in src/launcher/worker-command.ts).
import { existsSync } from 'node:fs';
import { register as registerHooks } from 'node:module';

const built = new URL('../dist/bin/fsdp-run.js', import.meta.url);
if (existsSync(built)) {
  await import(built.href);
} else {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch {
    process.stderr.write(
      'fsdp-run: this copy of @fsdp-ts/collectives is not built (no dist/bin/fsdp-run.js) and tsx is not installed to run its source. Fix: run `npm ci` at the root of the fsdp-ts repository (or `npm run build`).\n',
    );
    process.exit(2);
  }
  const sourceCondition = `export function resolve(specifier, context, nextResolve) {
    return nextResolve(specifier, { ...context, conditions: [...context.conditions, '@fsdp-ts/source'] });
  }`;
  registerHooks(`data:text/javascript,${encodeURIComponent(sourceCondition)}`);
  register();
  await import(new URL('../src/bin/fsdp-run.ts', import.meta.url).href);
}
