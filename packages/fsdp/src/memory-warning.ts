import type { FlatParamHandle } from '@fsdp-ts/flat-param';
import {
  type EstimatedSettings,
  estimatedSettings,
  estimateMemoryPerRank,
  type MemoryEstimate,
  type OffloadPlacement,
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

/** "Adam state 120.0 MiB" / "Adam state on disk (staged 48.0 MiB, dirty page cache 64.0 MiB)". */
function placementText(estimate: MemoryEstimate, offload: OffloadPlacement): string {
  const state =
    offload.optimizerState === 'disk'
      ? 'Adam state on disk'
      : offload.optimizerState === 'memory'
        ? `Adam state in host memory ${mib(estimate.hostOptimizerStateBytes)} (both slots)`
        : `Adam state ${mib(estimate.optimizerStateBytes)}`;
  const streamed = [
    estimate.offloadStagingBytes === 0 ? '' : `, offload chunks ${mib(estimate.offloadStagingBytes)}`,
    estimate.pageCacheBytes === 0 ? '' : `, dirty page cache ${mib(estimate.pageCacheBytes)}`,
  ].join('');
  const parameters = offload.parameters === 'disk' ? 'parameter shards read ahead' : 'parameters';
  return `${parameters} ${mib(estimate.parametersBytes)}, gradients ${mib(estimate.gradientsBytes)}, ${state}, gathered units ${mib(estimate.gatheredBytes)}${streamed}`;
}

/** `offload` settings that fit under `limitBytes` at this world size, the smallest change first. */
function fittingOffload(
  units: readonly UnitSize[],
  limitBytes: number,
  strategy: ShardingStrategy | EstimatedSettings,
  worldSize: number,
  offload: OffloadPlacement,
): { placement: OffloadPlacement; text: string; bytes: number } | undefined {
  const candidates: { placement: OffloadPlacement; text: string }[] = [
    { placement: { optimizerState: 'disk' }, text: "offload: { optimizerState: 'disk' }" },
    {
      placement: { optimizerState: 'disk', parameters: 'disk' },
      text: "offload: { optimizerState: 'disk', parameters: 'disk' }",
    },
  ];
  for (const candidate of candidates) {
    const already =
      (offload.optimizerState ?? 'none') === candidate.placement.optimizerState &&
      (offload.parameters ?? 'none') === (candidate.placement.parameters ?? 'none');
    if (already || (offload.parameters === 'disk' && candidate.placement.parameters !== 'disk')) continue;
    const bytes = estimateMemoryPerRank({
      units,
      worldSize,
      strategy,
      offload: candidate.placement,
    }).totalBytes;
    if (bytes <= limitBytes) return { ...candidate, bytes };
  }
  return undefined;
}

/**
 * The warning FSDP prints when its estimate for this rank exceeds the rank's memory budget, or
 * undefined when it fits. It names the budget's source, the estimate's parts, the full-shard
 * world size that would fit (or says that none does), and the `offload` setting that fits at this
 * world size when one does.
 */
export function memoryWarning(
  estimate: MemoryEstimate,
  limit: RankMemoryLimit,
  strategy: ShardingStrategy | EstimatedSettings,
  worldSize: number,
  units: readonly UnitSize[],
  offload: OffloadPlacement = {},
): string | undefined {
  const { name } = estimatedSettings(strategy);
  if (estimate.totalBytes <= limit.bytes) return undefined;
  const fitting = smallestFittingWorldSize(units, limit.bytes, 8, offload);
  const worldFix =
    fitting === undefined
      ? 'no full-shard world size fits: the gathered units alone need more; wrap smaller units (autoWrapPolicy) or give each rank more memory'
      : fitting > worldSize || name !== shardingPresets['full-shard'].name
        ? `'full-shard' at a world size of ${fitting} or more fits (estimated ${mib(estimateMemoryPerRank({ units, worldSize: fitting, strategy: 'full-shard', offload }).totalBytes)} per rank), or give each rank more memory`
        : 'give each rank more memory, or wrap smaller units (autoWrapPolicy)';
  const offloadFix = fittingOffload(units, limit.bytes, strategy, worldSize, offload);
  const fix =
    offloadFix === undefined
      ? `${worldFix}.`
      : `${offloadFix.text} fits at this world size (estimated ${mib(offloadFix.bytes)} per rank); or ${worldFix}.`;
  return (
    `FSDP estimates ${mib(estimate.totalBytes)} per rank for training with '${name}' at world size ${worldSize} ` +
    `(${placementText(estimate, offload)}; activations come on top), but this rank has ${mib(limit.bytes)} ` +
    `(${limit.source}). Fix: ${fix}`
  );
}

/** Estimates this rank's memory and warns (console.warn) when it exceeds the rank's budget. */
export function warnWhenOverMemoryLimit(
  units: readonly UnitHandles[],
  strategy: ShardingSettings,
  worldSize: number,
  offload: OffloadPlacement = {},
): MemoryEstimate {
  const sizes = unitSizes(units);
  const estimate = estimateMemoryPerRank({ units: sizes, worldSize, strategy, offload });
  const warning = memoryWarning(estimate, rankMemoryLimit(), strategy, worldSize, sizes, offload);
  if (warning !== undefined) console.warn(warning);
  return estimate;
}
