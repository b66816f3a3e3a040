// `npm run release:dry`: what the next release would publish, without touching this checkout.
// Copies the repository (sources, .changeset, built dist; node_modules linked) to a temporary
// directory, runs `changeset version` there, then prints every public package's new version, its
// CHANGELOG.md and the `npm pack --dry-run` file list. Run `npm run build` first.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

const root = join(import.meta.dirname, '..');
const copy = mkdtempSync(join(tmpdir(), 'fsdp-ts-release-dry-'));
const skipped = new Set(['node_modules', '.git', '.turbo', 'output', 'bench-results']);
try {
  cpSync(root, copy, { recursive: true, filter: (source) => !skipped.has(basename(source)) });
  symlinkSync(join(root, 'node_modules'), join(copy, 'node_modules'), 'dir');
  const run = (command, args, cwd = copy) =>
    execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  run(process.execPath, [join(root, 'node_modules', '@changesets', 'cli', 'bin.js'), 'version']);
  for (const directory of readdirSync(join(copy, 'packages')).sort()) {
    const packageDirectory = join(copy, 'packages', directory);
    if (!existsSync(join(packageDirectory, 'package.json'))) continue;
    const manifest = JSON.parse(readFileSync(join(packageDirectory, 'package.json'), 'utf8'));
    if (manifest.private) continue;
    const before = JSON.parse(
      readFileSync(join(root, 'packages', directory, 'package.json'), 'utf8'),
    ).version;
    console.log(`\n=== ${manifest.name}: ${before} -> ${manifest.version}`);
    const changelog = join(packageDirectory, 'CHANGELOG.md');
    console.log(existsSync(changelog) ? readFileSync(changelog, 'utf8') : '(no CHANGELOG.md: no changeset)');
    if (!existsSync(join(packageDirectory, 'dist'))) {
      console.log('(no dist/: run `npm run build` first to see the packed files)');
      continue;
    }
    const [pack] = JSON.parse(
      run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], packageDirectory),
    );
    const files = pack.files.map((file) => `${file.path} (${file.size} B)`);
    console.log(
      `npm pack: ${pack.filename}, ${pack.entryCount} files, ${pack.size} B packed, ${pack.unpackedSize} B unpacked`,
    );
    console.log(`  ${files.join('\n  ')}`);
  }
} finally {
  rmSync(copy, { recursive: true, force: true });
}
