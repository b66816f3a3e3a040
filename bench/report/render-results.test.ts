import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { benchmarks } from './benchmarks';
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

describe('the cluster benchmark (bench/cluster)', () => {
  const cluster = benchmarks.find((entry) => entry.file === 'cluster.json')!;
  const spreadOf = (median: number) => ({ min: median * 0.9, median, max: median * 1.1 });
  const row = (name: string, tokensPerSecond: number) => ({
    name,
    tokensPerSecond: spreadOf(tokensPerSecond),
    stepMs: spreadOf(2048_000 / tokensPerSecond),
    computeStepMs: 370,
    exposedCommunicationMs: 2048_000 / tokensPerSecond - 370,
    modelWireBytesPerStep: 9.6e6,
    countedWireBytesPerStep: spreadOf(9.9e6),
    boundMs: 390,
    ofBound: 0.8,
    limit: 'own overhead',
  });
  // The shape cluster-bench.ts writes (one case, trimmed to what the renderer reads).
  const results = {
    date: '2026-12-02T00:00:00Z',
    hybridShard: 'not run: 2 cores',
    cases: [
      {
        rate: '200mbit',
        setting: 'compute',
        busy: false,
        batch: 8,
        seqLen: 128,
        linkBytesPerSecond: spreadOf(24.1e6),
        computeStepMs: spreadOf(370),
        torchComputeStepMs: spreadOf(360),
        rows: [
          row('fsdp-ts full-shard', 2600),
          {
            ...row('fsdp-ts no-shard, bfloat16 wire', 4100),
            terms: { computeMs: 370, wireMs: 200, cpuMs: 480, orderMs: 430 },
            binding: 'cpu',
            limit: 'cores',
            ofBound: 0.96,
            attribution: {
              profiledStepMs: 520,
              mainThreadMs: { kernels: 300, fsdp: 40, other: 60, gc: 20, waiting: 90, idle: 0 },
              communicationThreadCpuMs: 70,
              mainRunnableMs: 35,
            },
          },
          row('PyTorch FSDP (gloo)', 1500),
          row('PyTorch DDP (gloo)', 2600),
        ],
      },
    ],
    targets: [
      { name: 'best ≥ 1.3× DDP', met: true, figure: '1.58×' },
      { name: 'every row ≥ 0.85 of its bound', met: false, figure: '0 of 4', stoppedBy: 'own overhead' },
    ],
  };

  it('renders every row with its PyTorch peer from the same case, and the targets with what stops them', () => {
    const { markdown, missingPeers } = renderResults([cluster], () => results);
    expect(missingPeers).toEqual([]);
    expect(markdown).toContain('200 Mbit/s, batch 8 × 128 per rank: link 24.1 MB/s per direction');
    expect(markdown).toMatch(
      /\| fsdp-ts full-shard \| 2600 \(.*\) \| .* \| 9\.6 \/ 9\.9 \| 390 \(max of compute, wire\) \| 80% \| own overhead \| {2}\| 1500 \(.*\); 1\.73× \|/,
    );
    // With the CPU term and the profile: the three terms, the binding one, where the step goes.
    expect(markdown).toContain(
      '| 9.6 / 9.9 | 370 / 200 / 480 / 430 | 96% | cores (binding: cpu) | kernels 300 · fsdp 40 · other 60 · gc 20 · waiting 90 · idle 0; comm thread 70 CPU, no core 35 (of 520) |',
    );
    expect(markdown).toContain(
      '- **NOT met**: every row ≥ 0.85 of its bound: 0 of 4 (stopped by: own overhead)',
    );
    expect(markdown).toContain('hybrid-shard: not run: 2 cores.');
  });

  it('gives the README the best row against DDP and full-shard against PyTorch FSDP', () => {
    const table = renderHeadline([cluster], () => results);
    expect(table).toContain(
      '| 2 hosts on a 200 Mbit/s, batch 8 × 128 per rank: best fsdp-ts row (no-shard, bfloat16 wire) tokens/s vs PyTorch DDP | 1.58× (faster) |',
    );
    expect(table).toContain('full-shard tokens/s vs PyTorch FSDP | 1.73× (faster) |');
    expect(renderHeadline([cluster], () => ({ skipped: 'needs root' }))).not.toContain('2 hosts');
  });
});
