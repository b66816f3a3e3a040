import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { TensorView } from '@fsdp-ts/tensor';
import { describe, expect, it } from 'vitest';
import { flatOffsets, makeCuts } from './support/sharding';
import { fixtureParameters, fixtures, makeOptimizer, worstViolation } from './support/torch-fixtures';

const numels = fixtures.parameters.map(({ values }) => values.length);
const offsets = flatOffsets(numels);
const cases = fixtures.cases
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

// The same guarantee as norm-optimizers-sharded.int.test.ts, with @fsdp-ts/collectives' ProcessGroup
// (shm backend) as the group: |sharded − whole| <= 1e-6·|whole| + 1e-7.
describe('LAMB and LARS with a @fsdp-ts/collectives ProcessGroup (shm backend)', () => {
  for (const worldSize of [2, 3]) {
    it(`W = ${worldSize}: reassembled shards equal stepping the whole parameters`, async () => {
      const jobs = cases.map(({ caseIndex }) => ({
        caseIndex,
        cuts: makeCuts(numels, worldSize, 7 + caseIndex),
      }));
      const results = (await spawnThreadRanks(
        worldSize,
        new URL('./support/collectives-rank.ts', import.meta.url),
        'normRank',
        {
          args: { cases: jobs },
          timeoutMs: 90_000,
        },
      )) as number[][][];
      jobs.forEach(({ caseIndex, cuts }, job) => {
        const reassembled: number[] = [];
        numels.forEach((_, index) => {
          for (let rank = 0; rank < worldSize; rank++) {
            const flat = results[rank]![job]!;
            reassembled.push(
              ...flat.slice(offsets[index]! + cuts[index]![rank]!, offsets[index]! + cuts[index]![rank + 1]!),
            );
          }
        });
        const name = fixtures.cases[caseIndex]!.name;
        expect(worstViolation(reassembled, unshardedRun(caseIndex)), name).toBeLessThanOrEqual(1);
      });
    });
  }
});
