/** bench/RESULTS.md as rendered from the committed bench/results/*.json (the CLI and the test share this). */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchmarks } from './benchmarks';
import { type MissingPeer, renderHeadline, renderResults } from './render-results';

export const resultsDirectory = fileURLToPath(new URL('../results/', import.meta.url));
export const resultsPage = fileURLToPath(new URL('../RESULTS.md', import.meta.url));

/** The root README, whose performance table bench:report writes between its markers. */
export const readmePage = fileURLToPath(new URL('../../README.md', import.meta.url));

const read = (file: string) => {
  const path = join(resultsDirectory, file);
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as unknown) : undefined;
};

export function renderCommittedResults(): { markdown: string; missingPeers: MissingPeer[] } {
  return renderResults(benchmarks, read);
}

/** The root README's performance table as rendered from the committed results. */
export function renderCommittedHeadline(): string {
  return renderHeadline(benchmarks, read);
}
