import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { TensorView } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import type { NormRankJob } from './support/norm-rank-worker';
import { flatStorageOf, gradPiece, makeCuts, shardedParameters } from './support/sharding';
import { createSharedMemoryGroupBuffers } from './support/shared-memory-group';
import { fixtureParameters, fixtures, makeOptimizer, worstViolation } from './support/torch-fixtures';

const template = fixtures.parameters;
const numels = template.map(({ values }) => values.length);
const totalNumel = numels.reduce((sum, numel) => sum + numel, 0);
const normCases = fixtures.cases
  .map((testCase, caseIndex) => ({ testCase, caseIndex }))
  .filter(({ testCase }) => testCase.optimizer === 'LAMB' || testCase.optimizer === 'LARS');

function unshardedRun(caseIndex: number): number[] {
  const params = fixtureParameters();
  const optimizer = makeOptimizer(fixtures.cases[caseIndex]!, params);
  for (let step = 0; step < fixtures.steps; step++) {
    params.forEach((param, index) => {
      param.grad = TensorView.fromArray(fixtures.grads[step]![index]!, param.shape);
    });
    optimizer.step();
  }
  return params.flatMap((param) => param.data.toArray());
}

// `--import tsx` in a Worker's execArgv does not reach the worker's loader on Node 20, so the worker
// registers tsx itself, then imports the TypeScript rank script.
const tsxApi = pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api')).href;
const rankScript = new URL('./support/norm-rank-worker.ts', import.meta.url).href;
const workerBootstrap = `import(${JSON.stringify(tsxApi)}).then(({ register }) => { register(); return import(${JSON.stringify(rankScript)}); });`;

function runRank(job: NormRankJob): Promise<void> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(workerBootstrap, {
      eval: true,
      execArgv: ['--conditions=@fsdp-ts/source'],
      workerData: job,
    });
    const timer = setTimeout(() => {
      void worker.terminate();
      reject(new Error(`rank ${job.rank} did not finish in 60 s`));
    }, 60_000);
    worker.once('message', (message: { ok: boolean; error?: string }) => {
      clearTimeout(timer);
      if (message.ok) resolve();
      else reject(new Error(`rank ${job.rank}: ${message.error}`));
    });
    worker.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

// Each simulated rank is a worker thread; LAMB/LARS sum their partial squared norms with a real
// cross-thread all-reduce. Tolerance vs the whole parameter stepped in one thread:
// |sharded − whole| <= 1e-6·|whole| + 1e-7 (the sums are reordered, nothing else changes).
describe('LAMB and LARS under sharding (worker-thread ranks, shared-memory all-reduce)', () => {
  for (let worldSize = 1; worldSize <= 4; worldSize++) {
    it(`W = ${worldSize}: every case equals stepping the whole parameters`, async () => {
      const group = createSharedMemoryGroupBuffers(worldSize, 2 * numels.length);
      const cases = normCases.map(({ caseIndex }) => {
        const flat = flatStorageOf(
          template.map(({ values }) => values),
          true,
        );
        return {
          caseIndex,
          cuts: makeCuts(numels, worldSize, 31 * worldSize + caseIndex),
          flat: flat.buffer() as SharedArrayBuffer,
          numel: totalNumel,
        };
      });
      await Promise.all(
        Array.from({ length: worldSize }, (_, rank) => runRank({ rank, worldSize, group, cases })),
      );
      for (const { caseIndex, flat, cuts } of cases) {
        const sharded = Array.from(new Float32Array(flat, 0, totalNumel));
        const whole = unshardedRun(caseIndex);
        const name = fixtures.cases[caseIndex]!.name;
        expect(worstViolation(sharded, whole), `${name} cuts ${JSON.stringify(cuts)}`).toBeLessThanOrEqual(1);
        if (worldSize > 1) expect(sharded, name).not.toEqual(fixtures.parameters.flatMap((p) => p.values));
      }
    });
  }

  it('without the group, a rank holding a fragment uses the fragment norm (the gap the group closes)', () => {
    const lamb = normCases.find(({ testCase }) => testCase.name === 'lamb default')!;
    const cuts = numels.map((numel) => [0, Math.floor(numel / 2), numel]);
    const flat = flatStorageOf(
      template.map(({ values }) => values),
      false,
    );
    const ranks = [0, 1].map((rank) => {
      const params = shardedParameters(template, flat, cuts, rank);
      return { rank, params, optimizer: makeOptimizer(lamb.testCase, params) };
    });
    for (let step = 0; step < fixtures.steps; step++) {
      for (const { rank, params, optimizer } of ranks) {
        params.forEach((param, index) => {
          param.grad = gradPiece(fixtures.grads[step]![index]!, cuts, index, rank);
        });
        optimizer.step();
      }
    }
    expect(worstViolation(Array.from(flat.array()), unshardedRun(lamb.caseIndex))).toBeGreaterThan(100);
  });
});
