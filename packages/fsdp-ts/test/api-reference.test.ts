import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// [Note: API reference check]
// `npm run docs` runs TypeDoc with the root typedoc.json: every published package's
// src/index.ts (its module comment names the package and adds its README as a document),
// docs/README.md as the index, the guides in docs/guides/, and validation warnings treated as
// errors (an export of a kind listed in `requiredToBeDocumented` without a doc comment, a broken
// `{@link}`). This test builds the site once, with that same configuration, into a temporary
// folder, fails on any other TypeDoc warning too, then opens the index, the module list, one page
// per package and one guide in headless Chromium and reads what a reader would see.

const run = promisify(execFile);
const root = join(import.meta.dirname, '..', '..', '..');
const typedoc = join(root, 'node_modules', 'typedoc', 'bin', 'typedoc');
const chromium = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

// One page per package: its module page, named as TypeDoc names it, and one export it lists.
const packagePages = [
  { name: '@fsdp-ts/errors', page: 'modules/_fsdp-ts_errors.html', knownExport: 'FsdpTsError' },
  { name: '@fsdp-ts/kernels', page: 'modules/_fsdp-ts_kernels.html', knownExport: 'loadBlas' },
  { name: '@fsdp-ts/tensor', page: 'modules/_fsdp-ts_tensor.html', knownExport: 'TensorView' },
  { name: '@fsdp-ts/collectives', page: 'modules/_fsdp-ts_collectives.html', knownExport: 'ProcessGroup' },
  { name: '@fsdp-ts/nn', page: 'modules/_fsdp-ts_nn.html', knownExport: 'CausalSelfAttention' },
  { name: '@fsdp-ts/flat-param', page: 'modules/_fsdp-ts_flat-param.html', knownExport: 'FlatParamHandle' },
  { name: '@fsdp-ts/optim', page: 'modules/_fsdp-ts_optim.html', knownExport: 'AdamW' },
  { name: '@fsdp-ts/checkpoint', page: 'modules/_fsdp-ts_checkpoint.html', knownExport: 'writeCheckpoint' },
  { name: '@fsdp-ts/fsdp', page: 'modules/_fsdp-ts_fsdp.html', knownExport: 'FullyShardedDataParallel' },
  { name: '@fsdp-ts/layers', page: 'modules/_fsdp-ts_layers.html', knownExport: 'ShardedTrainer' },
  { name: 'fsdp-ts', page: 'modules/fsdp-ts.html', knownExport: 'FullyShardedDataParallel' },
];

let site = '';
let build: { ok: boolean; output: string } = { ok: false, output: '' };

beforeAll(async () => {
  site = mkdtempSync(join(tmpdir(), 'fsdp-ts-docs-site-'));
  try {
    const { stdout, stderr } = await run(process.execPath, [typedoc, '--out', site], {
      cwd: root,
      timeout: 170_000,
      env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
      maxBuffer: 16 * 1024 * 1024,
    });
    build = { ok: true, output: stdout + stderr };
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; message: string };
    build = { ok: false, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` || failed.message };
  }
}, 180_000);

afterAll(() => {
  if (site) rmSync(site, { recursive: true, force: true });
});

// Chromium's DOM after scripts ran.
const renderedDom = async (page: string): Promise<string> => {
  const profile = mkdtempSync(join(tmpdir(), 'fsdp-ts-chromium-'));
  try {
    const { stdout } = await run(
      chromium,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
        `--user-data-dir=${profile}`,
        // TypeDoc's pages hide <body> until their script shows them (at the latest after 500 ms):
        // let timers run before the DOM is read, so what is read is what a reader sees.
        '--virtual-time-budget=5000',
        '--dump-dom',
        `file://${join(site, page)}`,
      ],
      { timeout: 60_000, maxBuffer: 32 * 1024 * 1024 },
    );
    expect(stdout, `${page} rendered nothing`).toContain('</body>');
    expect(stdout, `${page}: the page's script did not show its <body>`).not.toMatch(
      /<body[^>]*display:\s*none/,
    );
    return stdout;
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
};

// The same, as text: tags, scripts and styles removed.
const renderedText = async (page: string): Promise<string> =>
  (await renderedDom(page))
    .replace(/<script[\s\S]*?<\/script>/g, ' ')
    .replace(/<style[\s\S]*?<\/style>/g, ' ')
    .replace(/<[^>]+>/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ');

describe('the API reference (npm run docs)', () => {
  it('builds with no warning: every required public export has a doc comment, every link resolves', () => {
    expect(
      build.ok,
      `typedoc failed; fix what it reports (see CONTRIBUTING.md, "API reference"):\n${build.output}`,
    ).toBe(true);
    // Any other warning fails too: a guide's link to an anchor the site lacks, a file that is not
    // there (heading anchors are GitHub's: scripts/typedoc-github-slugs.mjs).
    expect(build.output.split('\n').filter((line) => /\[(warning|error)\]/.test(line))).toEqual([]);
    expect(existsSync(join(site, 'index.html'))).toBe(true);
  });

  it('renders the index, one page per package and a guide in headless Chromium', async () => {
    expect(
      existsSync(chromium),
      `Chromium is missing at ${chromium}: install it with \`apt-get install -y chromium\` (Debian's package; .ci/run does this when it runs as root), or set CHROMIUM_PATH`,
    ).toBe(true);
    expect(build.ok, 'the site did not build; see the test above').toBe(true);

    // The index is docs/README.md, its links to the guides and the package READMEs rewritten to
    // their pages in the site; modules.html lists the packages.
    const indexDom = await renderedDom('index.html');
    expect(indexDom).toContain('fsdp-ts documentation');
    expect(indexDom).toMatch(/href="documents\/[\w-]*first-training-script\.html"/);
    expect(indexDom).toContain('href="documents/_fsdp-ts_fsdp.README.html"');
    const modules = await renderedText('modules.html');
    for (const { name } of packagePages) expect(modules).toContain(name);

    // Two pages at a time: the machine has two cores.
    const pages = [...packagePages];
    const rendered: { name: string; knownExport: string; text: string }[] = [];
    while (pages.length > 0) {
      const batch = pages.splice(0, 2);
      rendered.push(
        ...(await Promise.all(
          batch.map(async (entry) => ({ ...entry, text: await renderedText(entry.page) })),
        )),
      );
    }
    for (const { name, knownExport, text } of rendered) {
      expect(text, `module page of ${name}`).toContain(name);
      expect(text, `module page of ${name}`).toContain(knownExport);
    }

    // Named first-training-script.html, or guides_first-training-script.html beside docs/reference/.
    const guidePage = readdirSync(join(site, 'documents')).find((name) =>
      name.endsWith('first-training-script.html'),
    );
    expect(guidePage, 'the first guide has no page in documents/').toBeDefined();
    const guide = await renderedText(`documents/${guidePage}`);
    expect(guide).toContain('Your first training script');
    expect(guide).toContain('FullyShardedDataParallel');
  }, 170_000);
});
