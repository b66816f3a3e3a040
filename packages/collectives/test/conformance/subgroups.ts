import { allocateShared, type ProcessGroup } from '../../src/index.js';
import type { CaseOutcome } from './run-conformance.js';

/**
 * 4 ranks as 2 x 2 (hybrid sharding): shard groups {0,1}, {2,3} and replica groups {0,2}, {1,3};
 * an all-reduce in each must sum exactly its members' values.
 */
export async function subgroupOutcomes(world: ProcessGroup): Promise<CaseOutcome[]> {
  const outcomes: CaseOutcome[] = [];
  const rank = world.rank;
  const shardMembers = rank < 2 ? [0, 1] : [2, 3];
  const replicaMembers = rank % 2 === 0 ? [0, 2] : [1, 3];
  for (const members of [shardMembers, replicaMembers]) {
    const group = await world.newGroup(members);
    try {
      const buffer = allocateShared(Float32Array, 5);
      buffer.fill(rank + 1);
      group.allReduce(buffer).wait();
      const expected = members.reduce((sum, member) => sum + member + 1, 0);
      const wrongRank = group.rank !== members.indexOf(rank) || group.size !== 2;
      const wrong = buffer.find((value) => value !== expected);
      outcomes.push(
        wrong === undefined && !wrongRank
          ? { name: `subgroup [${members}]` }
          : {
              name: `subgroup [${members}]`,
              failure: `rank ${rank}: got ${wrong} (expected ${expected}), group rank ${group.rank}`,
            },
      );
    } finally {
      await group.destroy();
    }
  }
  return outcomes;
}
