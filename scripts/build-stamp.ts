// [Note: build stamp]
// The processes the test suite starts through packages/collectives/test/helpers/rank-commands.ts
// (fsdp's fsdp-run launches, the parity file's mpirun ranks, the examples' and docs' scripts) run
// the packages from their builds when the builds are those of the sources on disk, and from the
// sources through tsx otherwise: importing fsdp, nn, optim and tfjs from source costs a process
// about 1.0-1.5 CPU-seconds before its first op, from dist/ about 0.6 (architecture/performance.md,
// "The test suite"). What is "the build of the sources" is
// decided by content, never by timestamps: `npm run build` ends by writing a SHA-256 of every
// package's build inputs (src/, package.json, tsup.config.ts, tsconfig.json, the root
// tsconfig.base.json and scripts/declaration-options.ts) and outputs (dist/, bin/) to node_modules/.cache/fsdp-ts/build-stamp.json;
// vitest.config.ts recomputes the digest and runs ranks from dist/ only when it is the stamped
// one. An edited source, a deleted dist/ or a build that failed half-way all change the digest,
// so the ranks fall back to the sources and test what is on disk. FSDP_TEST_RANKS=source forces
// the sources (for instance while a build is running elsewhere).
//
//   node --import tsx scripts/build-stamp.ts          writes the stamp (the last step of `npm run build`)
//   node --import tsx scripts/build-stamp.ts --check  prints `dist` or `source`: what the tests would use
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const repositoryRoot = fileURLToPath(new URL('..', import.meta.url));
const stampPathOf = (root: string) => join(root, 'node_modules', '.cache', 'fsdp-ts', 'build-stamp.json');

/** Folders and files of a package whose bytes decide its build (inputs) or are it (outputs). */
const PACKAGE_ENTRIES = ['src', 'dist', 'bin', 'package.json', 'tsup.config.ts', 'tsconfig.json'];

/** SHA-256 over the build inputs and outputs of every package under packages/, in a fixed order. */
export function buildDigest(root: string = repositoryRoot): string {
  const hash = createHash('sha256');
  const add = (path: string): void => {
    const stats = statSync(path);
    if (stats.isDirectory()) {
      for (const name of readdirSync(path).sort()) add(join(path, name));
      return;
    }
    hash.update(`${relative(root, path)}\0${stats.size}\0`);
    hash.update(readFileSync(path));
  };
  add(join(root, 'tsconfig.base.json'));
  // Every package's tsup config reads it ([Note: declarations from the builds]).
  const declarationOptions = join(root, 'scripts', 'declaration-options.ts');
  if (existsSync(declarationOptions)) add(declarationOptions);
  const packages = join(root, 'packages');
  for (const name of readdirSync(packages).sort()) {
    const directory = join(packages, name);
    if (!existsSync(join(directory, 'package.json'))) continue;
    // A package without a build yet has no stamp to match.
    if (!existsSync(join(directory, 'dist'))) hash.update(`${name}\0no dist\0`);
    for (const entry of PACKAGE_ENTRIES) {
      const path = join(directory, entry);
      if (existsSync(path)) add(path);
    }
  }
  return hash.digest('hex');
}

/** 'dist' when the builds on disk are those of the sources on disk (the stamp matches), else 'source'. */
export function testRanksFrom(
  environment: NodeJS.ProcessEnv = process.env,
  root: string = repositoryRoot,
): 'dist' | 'source' {
  const stampPath = stampPathOf(root);
  const forced = environment.FSDP_TEST_RANKS;
  if (forced === 'source') return 'source';
  if (forced !== undefined && forced !== '' && forced !== 'dist') {
    throw new Error(
      `FSDP_TEST_RANKS is '${forced}': expected 'source' or 'dist' (or unset, to decide by the build stamp).`,
    );
  }
  if (!existsSync(stampPath)) return 'source';
  try {
    const stamp = JSON.parse(readFileSync(stampPath, 'utf8')) as { digest?: string };
    return stamp.digest === buildDigest(root) ? 'dist' : 'source';
  } catch {
    return 'source';
  }
}

export function writeStamp(root: string = repositoryRoot): void {
  const stampPath = stampPathOf(root);
  mkdirSync(dirname(stampPath), { recursive: true });
  const temporary = `${stampPath}.${process.pid}.tmp`;
  writeFileSync(
    temporary,
    `${JSON.stringify({ digest: buildDigest(root), written: new Date().toISOString() })}\n`,
  );
  renameSync(temporary, stampPath);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes('--check')) console.log(testRanksFrom());
  else writeStamp();
}
