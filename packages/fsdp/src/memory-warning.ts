import type { FlatParamHandle } from '@fsdp-ts/flat-param';
import {
  type EstimatedSettings,
  estimatedSettings,
  estimateMemoryPerRank,
  type MemoryEstimate,
  smallestFittingWorldSize,
  type UnitSize,
} from './memory-estimate';
import { type RankMemoryLimit, rankMemoryLimit } from './memory-limit';
import { type ShardingSettings, type ShardingStrategy, shardingPresets } from './sharding-strategy';

/** What the estimate needs to know of a wrapper's units. */
export interface UnitHandles {
  readonly isRoot: boolean;
  readonly handles: readonly FlatParamHandle[];
}

export function unitSizes(units: readonly UnitHandles[]): UnitSize[] {
  return units.map((unit) => ({
    isRoot: unit.isRoot,
    paddedNumel: unit.handles.reduce((sum, handle) => sum + handle.layout.paddedNumel, 0),
  }));
}

const MIB = 1024 ** 2;
const mib = (bytes: number) => `${(bytes / MIB).toFixed(1)} MiB`;

/**
 * The warning FSDP prints when its estimate for this rank exceeds the rank's memory budget, or
 * undefined when it fits. It names the budget's source, the estimate's parts, and the full-shard
 * world size that would fit (or says that none does).
 */
export function memoryWarning(
  estimate: MemoryEstimate,
  limit: RankMemoryLimit,
  strategy: ShardingStrategy | EstimatedSettings,
  worldSize: number,
  units: readonly UnitSize[],
): string | undefined {
  const { name } = estimatedSettings(strategy);
  if (estimate.totalBytes <= limit.bytes) return undefined;
  const fitting = smallestFittingWorldSize(units, limit.bytes);
  const fix =
    fitting === undefined
      ? 'no full-shard world size fits: the gathered units alone need more; wrap smaller units (autoWrapPolicy) or give each rank more memory.'
      : fitting > worldSize || name !== shardingPresets['full-shard'].name
        ? `'full-shard' at a world size of ${fitting} or more fits (estimated ${mib(estimateMemoryPerRank({ units, worldSize: fitting, strategy: 'full-shard' }).totalBytes)} per rank), or give each rank more memory.`
        : 'give each rank more memory, or wrap smaller units (autoWrapPolicy).';
  return (
    `FSDP estimates ${mib(estimate.totalBytes)} per rank for training with '${name}' at world size ${worldSize} ` +
    `(parameters ${mib(estimate.parametersBytes)}, gradients ${mib(estimate.gradientsBytes)}, Adam state ${mib(estimate.optimizerStateBytes)}, ` +
    `gathered units ${mib(estimate.gatheredBytes)}; activations come on top), but this rank has ${mib(limit.bytes)} ` +
    `(${limit.source}). Fix: ${fix}`
  );
}

/** Estimates this rank's memory and warns (console.warn) when it exceeds the rank's budget. */
export function warnWhenOverMemoryLimit(
  units: readonly UnitHandles[],
  strategy: ShardingSettings,
  worldSize: number,
): MemoryEstimate {
  const sizes = unitSizes(units);
  const estimate = estimateMemoryPerRank({ units: sizes, worldSize, strategy });
  const warning = memoryWarning(estimate, rankMemoryLimit(), strategy, worldSize, sizes);
  if (warning !== undefined) console.warn(warning);
  return estimate;
}
