import { GPT } from '@fsdp-ts/nn';
import { initBackend } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import {
  backwardWireBytes,
  clusterTargets,
  type JudgedCase,
  judgeRow,
  modelWireBytes,
  parameterCounts,
} from './cluster-model';

describe('the cluster wire model', () => {
  it('counts the parameters of the reference GPT as @fsdp-ts/nn builds it', async () => {
    await initBackend('cpu');
    for (const seqLen of [16, 128]) {
      const config = { vocabSize: 256, dModel: 256, nLayers: 4, nHeads: 4, seqLen, tieEmbeddings: true };
      const model = new GPT(config);
      const counted = model.parameters().reduce((sum, parameter) => sum + parameter.data.numel, 0);
      expect(parameterCounts(config).total).toBe(counted);
      const rootCounted = [model.tokenEmbedding, model.positionEmbedding, model.finalNorm]
        .flatMap((module) => module.parameters())
        .reduce((sum, parameter) => sum + parameter.data.numel, 0);
      expect(parameterCounts(config).root).toBe(rootCounted);
      const blockCounted = model.blocks
        .children()[3]!
        .parameters()
        .reduce((sum, parameter) => sum + parameter.data.numel, 0);
      expect(parameterCounts(config).lastUnit).toBe(blockCounted);
    }
  });

  it('puts 2·P·(W−1)/W per all-reduce and three passes for full-shard on the wire, bfloat16 halving it', () => {
    const P = 1000;
    const R = 100;
    const L = 200;
    const counts = { total: P, root: R, lastUnit: L };
    expect(modelWireBytes('fsdp-ts no-shard', counts)).toBe(4 * P); // 2 passes × 4 B × P/2
    expect(modelWireBytes('PyTorch DDP (gloo)', counts)).toBe(4 * P);
    expect(modelWireBytes('fsdp-ts no-shard, bfloat16 wire', counts)).toBe(2 * P);
    // Forward gathers P, backward all but the root and the last unit, the reduce-scatter P.
    expect(modelWireBytes('fsdp-ts full-shard', counts)).toBe(2 * (2 * P - R - L) + 2 * P);
    expect(modelWireBytes('fsdp-ts full-shard, bfloat16 wire', counts)).toBe(2 * P - R - L + P);
    // PyTorch 1.13 gathers the last unit again, and its CPU shim reduce-scatters with an all-reduce.
    expect(modelWireBytes('PyTorch FSDP (gloo)', counts)).toBe(2 * (2 * P - R) + 4 * P);
    // 2 hosts × 2 ranks: hybrid crosses the link with one all-reduce of the shards, like DDP.
    expect(modelWireBytes('fsdp-ts hybrid-shard, 2 × 2', counts)).toBe(4 * P);
    expect(modelWireBytes('fsdp-ts hybrid-shard, 2 × 2, bfloat16 wire', counts)).toBe(2 * P);
    expect(modelWireBytes('fsdp-ts full-shard, 2 × 2', counts)).toBe((4 * (2 * P - R - L) + 4 * P) * 0.75);
    // What only backward can move: every byte of an all-reduce; full-shard's re-gathers and its reduce-scatter.
    expect(backwardWireBytes('fsdp-ts no-shard', counts)).toBe(4 * P);
    expect(backwardWireBytes('fsdp-ts full-shard', counts)).toBe(2 * (P - R - L) + 2 * P);
    expect(backwardWireBytes('fsdp-ts full-shard, bfloat16 wire', counts)).toBe(P - R - L + P);
    expect(backwardWireBytes('PyTorch FSDP (gloo)', counts)).toBe(2 * (P - R) + 4 * P);
  });
});

describe('judgeRow', () => {
  const link = 25e6; // bytes/s
  it('names the larger term of the bound when the row runs near it', () => {
    // 13 MB per direction over 25 MB/s = 520 ms > 370 ms compute.
    const verdict = judgeRow(
      { stepMs: 560, cpuMs: 380, computeCpuMs: 370, countedWireBytes: 13e6 },
      370,
      13e6,
      link,
      false,
    );
    expect(verdict.boundMs).toBeCloseTo(520);
    expect(verdict.ofBound).toBeCloseTo(520 / 560);
    expect(verdict.exposedCommunicationMs).toBe(190);
    expect(verdict.limit).toBe('link');
    const computeBound = judgeRow(
      { stepMs: 400, cpuMs: 390, computeCpuMs: 370, countedWireBytes: 1e6 },
      370,
      1e6,
      link,
      false,
    );
    expect(computeBound.limit).toBe('compute');
    expect(
      judgeRow({ stepMs: 400, cpuMs: 390, computeCpuMs: 370, countedWireBytes: 1e6 }, 370, 1e6, link, true)
        .limit,
    ).toBe('CPU contention');
  });

  it('tells CPU spent on communication from waiting when the row is far from its bound', () => {
    // 1000 ms step against a 520 ms bound: 480 ms above it.
    const figures = { stepMs: 1000, computeCpuMs: 360, countedWireBytes: 13e6 };
    const busyCores = judgeRow({ ...figures, cpuMs: 900 }, 370, 13e6, link, false);
    expect(busyCores.limit).toBe('CPU contention');
    expect(busyCores.why).toMatch(/480 ms\/step above it, its CPU 900 ms\/step, 540 more than the compute's/);
    const waiting = judgeRow({ ...figures, cpuMs: 420 }, 370, 13e6, link, false);
    expect(waiting.limit).toBe('own overhead');
  });

  it('adds the CPU term: the job CPU demand over the cores it has, binding when it is the largest', () => {
    const figures = { stepMs: 450, cpuMs: 400, computeCpuMs: 370, countedWireBytes: 2e6 };
    // 2 MB over 25 MB/s = 80 ms; 820 CPU-ms over 2 cores = 410 ms > 370 ms compute.
    const cores = judgeRow(figures, 370, 2e6, link, false, { demandMs: 820, coresAvailable: 2 });
    expect(cores.terms).toEqual({ computeMs: 370, wireMs: 80, cpuMs: 410 });
    expect(cores.binding).toBe('cpu');
    expect(cores.boundMs).toBeCloseTo(410);
    expect(cores.limit).toBe('cores');
    expect(cores.why).toMatch(/cpu 410 ms \(820 CPU-ms over 2\.00 cores\)/);
    // The busy process's share leaves 1.4 cores: 820 / 1.4 = 586 ms, above the 450 ms step.
    const busy = judgeRow(figures, 370, 2e6, link, true, { demandMs: 820, coresAvailable: 1.4 });
    expect(busy.boundMs).toBeCloseTo(820 / 1.4);
    expect(busy.limit).toBe('cores');
    // Far below every term: its own overhead, however much CPU it spends.
    const far = judgeRow({ ...figures, stepMs: 800, cpuMs: 790 }, 370, 2e6, link, false, {
      demandMs: 820,
      coresAvailable: 2,
    });
    expect(far.limit).toBe('own overhead');
    expect(far.why).toMatch(/390 ms\/step above it/);
    // The step's order: forward 120 + 10 MB of gradients over 25 MB/s (400) + optimizer 40 = 560 ms.
    const ordered = judgeRow(
      { ...figures, stepMs: 600 },
      370,
      13e6,
      link,
      false,
      { demandMs: 820, coresAvailable: 2 },
      {
        forwardMs: 120,
        optimizerMs: 40,
        backwardWireBytes: 10e6,
      },
    );
    expect(ordered.terms.orderMs).toBeCloseTo(560);
    expect(ordered.binding).toBe('order');
    expect(ordered.limit).toBe('step order');
    expect(ordered.ofBound).toBeCloseTo(560 / 600);
    // The compute binds when the demand is lower than it.
    expect(judgeRow(figures, 420, 2e6, link, false, { demandMs: 700, coresAvailable: 2 }).binding).toBe(
      'compute',
    );
  });
});

describe('clusterTargets', () => {
  const row = (name: JudgedCase['rows'][number]['name'], tokensPerSecond: number, ofBound = 0.9) => ({
    name,
    tokensPerSecond,
    stepMs: 1000,
    boundMs: 1000 * ofBound,
    ofBound,
    exposedCommunicationMs: 100,
    terms: { computeMs: 500, wireMs: 1000 * ofBound },
    binding: 'wire' as const,
    limit: 'link' as const,
    why: 'at the link',
  });
  it('weighs the best fsdp-ts row against DDP, full-shard against PyTorch FSDP, and marks cases not run', () => {
    const cases: JudgedCase[] = [
      {
        rate: '200mbit',
        setting: 'compute',
        busy: false,
        rows: [
          row('fsdp-ts full-shard', 1000),
          row('fsdp-ts full-shard, bfloat16 wire', 1600),
          row('fsdp-ts no-shard', 1100),
          row('fsdp-ts no-shard, bfloat16 wire', 1500, 0.5),
          row('PyTorch FSDP (gloo)', 600),
          row('PyTorch DDP (gloo)', 1300),
        ],
      },
    ];
    const targets = clusterTargets(cases);
    const find = (prefix: string) => targets.find((target) => target.name.startsWith(prefix));
    expect(find('200mbit, 8 × 128: best')).toMatchObject({
      met: false,
      figure: expect.stringContaining('1.23×'),
    });
    expect(find('200mbit, 8 × 128: full-shard ≥')).toMatchObject({ met: true });
    expect(find('200mbit, 8 × 128: full-shard bfloat16')).toMatchObject({ met: true });
    expect(find('200mbit, 8 × 128: no-shard bfloat16')).toMatchObject({ met: false });
    expect(find('1gbit, 8 × 128: best')?.met).toBeUndefined();
    // Only fsdp-ts rows are held to their bound.
    expect(find('every fsdp-ts row')).toMatchObject({ met: false, figure: '3 of 4 rows' });
  });
});
