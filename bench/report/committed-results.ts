/** bench/RESULTS.md as rendered from the committed bench/results/*.json (the CLI and the test share this). */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchmarks } from './benchmarks';
import { type MissingPeer, renderResults } from './render-results';

export const resultsDirectory = fileURLToPath(new URL('../results/', import.meta.url));
export const resultsPage = fileURLToPath(new URL('../RESULTS.md', import.meta.url));

export function renderCommittedResults(): { markdown: string; missingPeers: MissingPeer[] } {
  const read = (file: string) => {
    const path = join(resultsDirectory, file);
    return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as unknown) : undefined;
  };
  return renderResults(benchmarks, read);
}
