import type { ProcessGroup } from '@fsdp-ts/collectives';
import { FsdpError } from './errors';
import type { FsdpOptions } from './options';
import { resolveShardingPreset } from './sharding-strategy';

/** The two groups of 'hybrid-shard'. */
export interface HybridShardGroups {
  /** Ranks that shard the parameters among themselves (e.g. one node). */
  readonly shardGroup: ProcessGroup;
  /** Ranks holding the same shard in every shard group; sharded gradients are all-reduced here. */
  readonly replicateGroup: ProcessGroup;
}

/**
 * [Note: hybrid sharding]
 * `group` of size S x R is cut into R shard groups of S consecutive ranks (rank r is in shard
 * group floor(r / S) with shard rank r mod S) and S replicate groups (rank r with every rank of
 * the same shard rank). Parameters are full-shard within the shard group. After backward each
 * unit's gradient is reduce-scattered (average) in the shard group and the resulting shard is
 * all-reduced (average) in the replicate group: the average over all S x R ranks, with the
 * all-gathers, the larger traffic, staying inside a shard group.
 *
 * Collective and async (sub-groups connect): every rank of `group` calls it with the same size.
 */
export async function hybridShardGroups(
  group: ProcessGroup,
  shardGroupSize: number,
): Promise<HybridShardGroups> {
  const size = group.size;
  if (!Number.isInteger(shardGroupSize) || shardGroupSize < 1 || size % shardGroupSize !== 0) {
    throw new FsdpError(
      `shardGroupSize ${shardGroupSize} does not divide the group of ${size} ranks into equal shard groups.`,
      {
        code: 'invalid-option',
        rank: group.rank,
        expected: `a divisor of ${size}`,
        actual: shardGroupSize,
        fix: 'pass the number of ranks per node (a divisor of the world size).',
      },
    );
  }
  const first = Math.floor(group.rank / shardGroupSize) * shardGroupSize;
  const shardRanks = Array.from({ length: shardGroupSize }, (_, index) => first + index);
  const replicas = size / shardGroupSize;
  const replicaRanks = Array.from(
    { length: replicas },
    (_, index) => (group.rank % shardGroupSize) + index * shardGroupSize,
  );
  const shardGroup = await group.newGroup(shardRanks);
  const replicateGroup = await group.newGroup(replicaRanks);
  return { shardGroup, replicateGroup };
}

/** `options` with `group` + `shardGroupSize` replaced by the two sub-groups (other options unchanged). */
export async function withHybridGroups(options: FsdpOptions): Promise<FsdpOptions> {
  if (options?.shardGroupSize === undefined || !resolveShardingPreset(options.shardingStrategy).replicate)
    return options;
  const { shardGroupSize, group, ...rest } = options;
  if (group === undefined) return options;
  return { ...rest, ...(await hybridShardGroups(group, shardGroupSize)) };
}

/** The hybrid groups of the options (null for other strategies); checks the combination. */
export function resolveHybridGroups(options: FsdpOptions | undefined): HybridShardGroups | null {
  if (options === undefined || options === null) return null;
  const given = ['shardGroup', 'replicateGroup', 'shardGroupSize'].filter(
    (key) => (options as unknown as Record<string, unknown>)[key] !== undefined,
  );
  const preset = resolveShardingPreset(options.shardingStrategy);
  if (!preset.replicate) {
    if (given.length === 0) return null;
    throw new FsdpError(`${given.join(', ')} only apply to shardingStrategy 'hybrid-shard'.`, {
      code: 'invalid-option',
      expected: "shardingStrategy: 'hybrid-shard'",
      actual: preset.name,
      fix: `set shardingStrategy: 'hybrid-shard' or drop ${given.join(', ')}.`,
    });
  }
  const { shardGroup, replicateGroup } = options;
  if (shardGroup !== undefined && replicateGroup !== undefined) return { shardGroup, replicateGroup };
  if (options.shardGroupSize !== undefined) {
    throw new FsdpError(
      "'hybrid-shard' with shardGroupSize needs sub-groups, which connect asynchronously.",
      {
        code: 'invalid-option',
        expected: '{ shardGroup, replicateGroup } in the constructor',
        actual: { shardGroupSize: options.shardGroupSize },
        fix: 'use `await FullyShardedDataParallel.create(module, { group, shardingStrategy: "hybrid-shard", shardGroupSize })`, or build the groups with hybridShardGroups(group, size).',
      },
    );
  }
  throw new FsdpError("'hybrid-shard' needs its two groups.", {
    code: 'invalid-option',
    expected: '{ shardGroup, replicateGroup } or { group, shardGroupSize } with create()',
    actual: given,
    fix: 'pass the groups from `await hybridShardGroups(group, ranksPerNode)`.',
  });
}
