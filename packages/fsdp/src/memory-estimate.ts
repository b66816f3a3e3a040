import type { OptionKeys } from '@fsdp-ts/errors';
import { checkFsdpOptionKeys } from './internal/check-option-keys';
import { resolveShardingPreset, type ShardingPreset, type ShardingStrategy } from './sharding-strategy';

/**
 * [Note: memory model]
 * What one rank holds for training, in bytes, float32 throughout (P parameters in all, N ranks
 * sharding them, Adam's two moments as the default optimizer state):
 * - parameters, gradients, optimizer state: 4 + 4 + 8 bytes per element of this rank's part:
 *   the whole model under 'no-shard', one shard of every unit (P/N, plus padding) otherwise;
 * - gathered units: a unit's unsharded parameter and gradient buffers (8 bytes per element) while
 *   it runs. With reshardAfterForward ('full-shard', 'hybrid-shard') that is the root unit, which stays gathered
 *   for the whole step, plus at most two other units at once (the running one and the one
 *   prefetched); sharded without it ('shard-grad-op') every unit's parameters stay gathered from forward to
 *   backward (4 bytes per element of the whole model), and one unit's unsharded gradient is
 *   alive at the peak (each unit's reduction starts as its last gradient arrives; measured);
 *   'no-shard' views its whole buffers and needs nothing more.
 * Activations, tfjs's own tensors and the runtime (Node, tfjs, wasm heap) come on top; the
 * benchmarks report them separately.
 */
export interface UnitSize {
  /** Elements of the unit's flat parameters, padded to a multiple of the world size. */
  readonly paddedNumel: number;
  readonly isRoot: boolean;
}

/**
 * What estimateMemoryPerRank needs: the wrap units' sizes, the world size, the strategy, and the
 * optimizer's bytes of state per element.
 */
export interface MemoryEstimateRequest {
  readonly units: readonly UnitSize[];
  readonly worldSize: number;
  /** A built-in strategy or a preset; only its settings matter (see [Note: strategies are presets]). */
  readonly strategy: ShardingStrategy | EstimatedSettings;
  /** Optimizer state per parameter element, in bytes. Default 8 (Adam/AdamW: two float32 moments). */
  readonly optimizerStateBytesPerElement?: number;
}

/** Bytes per rank by what holds them (see [Note: memory model]). */
/** The keys of MemoryEstimateRequest ([Note: option keys] in @fsdp-ts/errors). */
const memoryEstimateRequestKeys = {
  units: true,
  worldSize: true,
  strategy: true,
  optimizerStateBytesPerElement: true,
} as const satisfies OptionKeys<MemoryEstimateRequest>;

/**
 * Bytes per rank: parameters, gradients, optimizer state, the gathered (unsharded) units, and their total.
 */
export interface MemoryEstimate {
  readonly parametersBytes: number;
  readonly gradientsBytes: number;
  readonly optimizerStateBytes: number;
  readonly gatheredBytes: number;
  readonly totalBytes: number;
}

/** The settings the estimate reads (ShardingPreset and ShardingSettings both have them). */
export type EstimatedSettings = Pick<ShardingPreset, 'name' | 'gradientReduction' | 'reshardAfterForward'>;

/** The settings of a strategy name, preset or resolved settings. */
export function estimatedSettings(strategy: ShardingStrategy | EstimatedSettings): EstimatedSettings {
  return typeof strategy === 'string' ? resolveShardingPreset(strategy) : strategy;
}

function largestUnit(units: readonly UnitSize[]): number {
  return units.reduce((largest, unit) => Math.max(largest, unit.paddedNumel), 0);
}

/** Units gathered at once besides the root, under full-shard: the running one and the prefetched one. */
export const UNITS_GATHERED_AT_ONCE = 2;

/** Estimates the memory one rank needs for a model under a sharding strategy, before building it. */
export function estimateMemoryPerRank(request: MemoryEstimateRequest): MemoryEstimate {
  checkFsdpOptionKeys('estimateMemoryPerRank', request, memoryEstimateRequestKeys, {
    shardingStrategy: 'strategy here',
  });
  const { units, worldSize } = request;
  const settings = estimatedSettings(request.strategy);
  const shardParameters = settings.gradientReduction === 'reduce-scatter';
  const stateBytes = request.optimizerStateBytesPerElement ?? 8;
  const total = units.reduce((sum, unit) => sum + unit.paddedNumel, 0);
  const owned = shardParameters ? total / worldSize : total;
  const largestOthers = [...units]
    .filter((unit) => !unit.isRoot)
    .map((unit) => unit.paddedNumel)
    .sort((a, b) => b - a)
    .slice(0, UNITS_GATHERED_AT_ONCE)
    .reduce((sum, numel) => sum + numel, 0);
  const root = units.find((unit) => unit.isRoot)?.paddedNumel ?? 0;
  let gatheredBytes = 0;
  if (settings.reshardAfterForward) gatheredBytes = 8 * (root + largestOthers);
  else if (shardParameters) gatheredBytes = 4 * total + 4 * largestUnit(units);
  const parametersBytes = 4 * owned;
  const gradientsBytes = 4 * owned;
  const optimizerStateBytes = stateBytes * owned;
  return {
    parametersBytes,
    gradientsBytes,
    optimizerStateBytes,
    gatheredBytes,
    totalBytes: parametersBytes + gradientsBytes + optimizerStateBytes + gatheredBytes,
  };
}

/**
 * The smallest full-shard world size (up to 4096) whose estimate fits in `limitBytes`, or
 * undefined when none does (the gathered units alone are too big: wrap smaller units).
 */
export function smallestFittingWorldSize(
  units: readonly UnitSize[],
  limitBytes: number,
  optimizerStateBytesPerElement = 8,
): number | undefined {
  for (let worldSize = 1; worldSize <= 4096; worldSize *= 2) {
    // Padding differs a little per world size; the unpadded sizes are close enough to choose.
    const estimate = estimateMemoryPerRank({
      units,
      worldSize,
      strategy: 'full-shard',
      optimizerStateBytesPerElement,
    });
    if (estimate.totalBytes <= limitBytes) return worldSize;
  }
  return undefined;
}
