import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { Module } from '@fsdp-ts/nn';
import { FsdpError } from './errors';
import type { AutoWrapPolicy } from './wrap-policy';

/**
 * - `full-shard`: parameters, gradients and optimizer state sharded; a unit's parameters are
 *   gathered for its forward, freed, and gathered again for its backward (ZeRO-3).
 * - `shard-grad-op`: gathered for forward and kept until after backward; gradients and optimizer
 *   state sharded (ZeRO-2).
 * - `no-shard`: plain data parallel; gradients all-reduced per unit (one bucket per unit).
 */
export type ShardingStrategy = 'full-shard' | 'shard-grad-op' | 'no-shard';

export const shardingStrategies: readonly ShardingStrategy[] = ['full-shard', 'shard-grad-op', 'no-shard'];

export interface FsdpOptions {
  /** The process group to shard over. Required. */
  group: ProcessGroup;
  /** Default 'full-shard'. */
  shardingStrategy?: ShardingStrategy;
  /** Which submodules become their own units; the root unit takes what is left. Default: none. */
  autoWrapPolicy?: AutoWrapPolicy;
  /**
   * Default true: each unit's parameters live in one flat buffer (one all-gather and one
   * reduce-scatter per unit). false: every parameter is its own communication unit (kept to
   * measure the flat-vs-unflat difference).
   */
  flattenParameters?: boolean;
  /** Issue the next unit's all-gather when a unit's backward starts. Default true. */
  backwardPrefetch?: boolean;
  /** Issue the next unit's all-gather when a unit's forward starts. Default false. */
  forwardPrefetch?: boolean;
  /** At most two units' all-gathers in flight at once (bounds memory). Default true. */
  limitAllGathers?: boolean;
  /** Modules whose parameters FSDP leaves alone (not sharded, not reduced). */
  ignoredModules?: readonly Module[];
  /** Broadcast rank 0's parameter values to every rank at construction. Default false. */
  syncModuleStates?: boolean;
  /** Alignment (elements) of each parameter in a flat buffer. Default 4 (16 bytes). */
  alignment?: number;
}

export interface ResolvedFsdpOptions {
  readonly group: ProcessGroup;
  readonly shardingStrategy: ShardingStrategy;
  readonly autoWrapPolicy: AutoWrapPolicy | undefined;
  readonly flattenParameters: boolean;
  readonly backwardPrefetch: boolean;
  readonly forwardPrefetch: boolean;
  readonly limitAllGathers: boolean;
  readonly ignoredModules: readonly Module[];
  readonly syncModuleStates: boolean;
  readonly alignment: number;
}

export function resolveOptions(options: FsdpOptions): ResolvedFsdpOptions {
  if (options === undefined || options.group === undefined) {
    throw new FsdpError('FullyShardedDataParallel needs a process group.', {
      code: 'invalid-option',
      expected: '{ group: ProcessGroup }',
      actual: options,
      fix: 'pass { group: await initProcessGroup() }.',
    });
  }
  const strategy = options.shardingStrategy ?? 'full-shard';
  if (!shardingStrategies.includes(strategy)) {
    throw new FsdpError(`Unknown sharding strategy ${JSON.stringify(strategy)}.`, {
      code: 'invalid-option',
      expected: shardingStrategies,
      actual: strategy,
      fix: `use one of ${shardingStrategies.join(', ')}.`,
    });
  }
  const alignment = options.alignment ?? 4;
  if (!Number.isInteger(alignment) || alignment < 1) {
    throw new FsdpError(`alignment must be a positive integer; got ${alignment}.`, {
      code: 'invalid-option',
      expected: 'an integer >= 1',
      actual: alignment,
    });
  }
  return {
    group: options.group,
    shardingStrategy: strategy,
    autoWrapPolicy: options.autoWrapPolicy,
    flattenParameters: options.flattenParameters ?? true,
    backwardPrefetch: options.backwardPrefetch ?? true,
    forwardPrefetch: options.forwardPrefetch ?? false,
    limitAllGathers: options.limitAllGathers ?? true,
    ignoredModules: options.ignoredModules ?? [],
    syncModuleStates: options.syncModuleStates ?? false,
    alignment,
  };
}
