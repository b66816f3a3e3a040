/**
 * `npm run bench:report`: renders bench/RESULTS.md from the committed results in bench/results/.
 *   npm run bench:report -- --collect   first copies the latest results of each benchmark from
 *                                       bench-results/ (where the benchmarks write, gitignored)
 *                                       into bench/results/ (tracked), then renders.
 *   npm run bench:report -- --check     renders and fails if bench/RESULTS.md or the README's
 *                                       performance table differs (what the test does).
 * The root README's performance table (between its two markers) is rendered from the same results.
 * Fails when a row has no peer.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchmarks } from './report/benchmarks';
import {
  readmePage,
  renderCommittedHeadline,
  renderCommittedResults,
  resultsDirectory,
  resultsPage,
} from './report/committed-results';
import { withHeadline } from './report/render-results';

const root = fileURLToPath(new URL('../', import.meta.url));

if (process.argv.includes('--collect')) {
  mkdirSync(resultsDirectory, { recursive: true });
  for (const { file } of benchmarks) {
    const latest = join(root, 'bench-results', file);
    if (!existsSync(latest)) continue;
    copyFileSync(latest, join(resultsDirectory, file));
    process.stderr.write(`collected bench-results/${file} -> bench/results/${file}\n`);
  }
}
const { markdown, missingPeers } = renderCommittedResults();
for (const missing of missingPeers)
  process.stderr.write(
    `${missing.benchmark}: "${missing.table}", row "${missing.row}" has no peer in its run\n`,
  );
const readme = readFileSync(readmePage, 'utf8');
const renderedReadme = withHeadline(readme, renderCommittedHeadline());
if (process.argv.includes('--check')) {
  const committed = existsSync(resultsPage) ? readFileSync(resultsPage, 'utf8') : '';
  if (committed !== markdown || readme !== renderedReadme) {
    process.stderr.write(
      "bench/RESULTS.md or README.md's performance table differs from what bench/results/ renders: run npm run bench:report\n",
    );
    process.exitCode = 1;
  }
} else {
  writeFileSync(resultsPage, markdown);
  writeFileSync(readmePage, renderedReadme);
  process.stderr.write("wrote bench/RESULTS.md and README.md's performance table\n");
}
if (missingPeers.length > 0) process.exitCode = 1;
