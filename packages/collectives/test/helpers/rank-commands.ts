/**
 * The node arguments of the processes the tests start (fsdp-run launches, scripts run alone,
 * mpirun ranks): the workspace packages from their builds when `npm run build`'s stamp matches
 * the sources on disk, else from the sources through tsx ([Note: build stamp] in
 * scripts/build-stamp.ts; vitest.config.ts sets FSDP_TEST_RANKS). A rank script that imports a
 * package's source by relative path as well as by name (test/multi-host-rank.ts) must keep the
 * sources: from a build the two would be two copies of one package.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const collectivesRoot = fileURLToPath(new URL('../..', import.meta.url));

/** Whether this run's processes use the packages' builds (FSDP_TEST_RANKS=dist). */
export const ranksFromBuild = process.env.FSDP_TEST_RANKS === 'dist';

/** Node arguments before a TypeScript script: tsx, plus the source condition unless from the builds. */
export function typescriptScriptArguments(): string[] {
  return ranksFromBuild ? ['--import', 'tsx'] : ['--conditions=@fsdp-ts/source', '--import', 'tsx'];
}

/**
 * Node arguments that start fsdp-run, before its own arguments: the built bin with plain node
 * (its ranks then resolve packages to their builds), or the source through tsx (ranks from source).
 */
export function fsdpRunArguments(): string[] {
  if (ranksFromBuild) return [join(collectivesRoot, 'dist', 'bin', 'fsdp-run.js')];
  return [...typescriptScriptArguments(), join(collectivesRoot, 'src', 'bin', 'fsdp-run.ts')];
}
