// A rank of the LAMB/LARS test over @fsdp-ts/collectives' real ProcessGroup (shm backend, one
// worker thread per rank, started by spawnThreadRanks). Returns its whole flat buffer; only its
// own pieces were stepped.
import { initProcessGroup, type ThreadRankArguments } from '@fsdp-ts/collectives';
import type { NormReductionGroup } from '@fsdp-ts/optim';
import { type Cuts, flatStorageOf, gradPiece, shardedParameters } from './sharding';
import { fixtures, makeOptimizer } from './torch-fixtures';

export async function normRank({
  rank,
  args,
}: ThreadRankArguments<{ cases: { caseIndex: number; cuts: Cuts }[] }>): Promise<number[][]> {
  const processGroup = await initProcessGroup({ timeoutMs: 30_000 });
  // Compile-time check that collectives' ProcessGroup satisfies optim's structural type.
  const group: NormReductionGroup = processGroup;
  try {
    return args.cases.map(({ caseIndex, cuts }) => {
      const flat = flatStorageOf(
        fixtures.parameters.map(({ values }) => values),
        true,
      );
      const params = shardedParameters(fixtures.parameters, flat, cuts, rank);
      const optimizer = makeOptimizer(fixtures.cases[caseIndex]!, params, group);
      for (let step = 0; step < fixtures.steps; step++) {
        params.forEach((param, index) => {
          param.grad = gradPiece(fixtures.grads[step]![index]!, cuts, index, rank);
        });
        optimizer.step();
      }
      return Array.from(flat.array());
    });
  } finally {
    await processGroup.destroy();
  }
}
