import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  readmePage,
  renderCommittedHeadline,
  renderCommittedResults,
  resultsPage,
} from './committed-results';
import { type Benchmark, renderHeadline, renderResults, withHeadline } from './render-results';

describe('bench/RESULTS.md', () => {
  const rendered = renderCommittedResults();

  it('is what npm run bench:report renders from the committed bench/results/*.json', () => {
    // Fails when RESULTS.md was edited by hand, or results changed without re-rendering:
    // run `npm run bench:report` (add `-- --collect` to take the latest bench-results/ first).
    expect(readFileSync(resultsPage, 'utf8')).toBe(rendered.markdown);
  });

  it('gives every row its peer from the same run', () => {
    expect(rendered.missingPeers).toEqual([]);
  });

  it("is the source of the root README's performance table", () => {
    // Fails when the README's table was edited by hand or the results changed: run npm run bench:report.
    const readme = readFileSync(readmePage, 'utf8');
    expect(withHeadline(readme, renderCommittedHeadline())).toBe(readme);
  });
});

describe('renderResults', () => {
  const benchmark: Benchmark = {
    file: 'example.json',
    title: 'example',
    command: 'npm run bench -w example',
    render: ((results: { peer?: number }) => ({
      tables: [
        {
          title: 'rows',
          columns: ['measure'],
          peerColumn: 'peer',
          rows: [{ cells: ['step'], peer: results.peer === undefined ? undefined : `${results.peer}` }],
        },
      ],
      targets: [{ name: 'step >= peer', met: false, figure: '0.4×' }],
    })) as Benchmark['render'],
  };

  it('reports a row whose peer is missing, and marks it in the table', () => {
    const { markdown, missingPeers } = renderResults([benchmark], () => ({}));
    expect(missingPeers).toEqual([{ benchmark: 'example.json', table: 'rows', row: 'step' }]);
    expect(markdown).toContain('| step | **missing** |');
  });

  it('prints the target verdict and the context, and for absent results the command instead of a table', () => {
    const present = renderResults([benchmark], () => ({ peer: 2, date: '2026-12-01', cores: 2, cpu: 'x' }));
    expect(present.missingPeers).toEqual([]);
    expect(present.markdown).toContain('- **NOT met**: step >= peer: 0.4×');
    expect(present.markdown).toContain('commit not recorded; 2 × x');
    const absent = renderResults([benchmark], () => undefined).markdown;
    expect(absent).toContain('No committed results: run `npm run bench -w example`');
    expect(absent).not.toContain('| step |');
  });

  it('puts each headline row with its run in the README table, and refuses a README without the markers', () => {
    const headlined: Benchmark = {
      ...benchmark,
      headline: ((results: { peer: number }) => [
        { what: 'step vs peer', ratio: `${results.peer}×` },
      ]) as NonNullable<Benchmark['headline']>,
    };
    const table = renderHeadline([headlined], () => ({ peer: 2, date: '2026-12-02T00:00:00Z' }));
    expect(table).toContain('| step vs peer | 2× | commit not recorded |');
    expect(renderHeadline([headlined], () => undefined)).not.toContain('step vs peer');
    expect(() => withHeadline('# no table here', table)).toThrow(/no generated performance table/);
  });
});
