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
 * benchmarks report them separately. Offload changes the first line: [Note: memory with offload].
 *
 * [Note: memory with offload]
 * FSDP's `offload` option moves bytes out of what the rank keeps resident (W ranks, `owned` the
 * elements of this rank's shards):
 * - `optimizerState: 'disk'`: the optimizer state (8·owned for Adam) lives in files, two slots of
 *   it (OFFLOAD_SLOTS: a step reads one and writes the other). What stays is the chunks being
 *   streamed (OFFLOAD_STAGED_CHUNKS chunks of the elements whose state is OFFLOAD_CHUNK_BYTES, each
 *   with every streamed buffer: the state's bytes per element, and 4 more when the parameters are
 *   streamed too) and the page cache the writes dirty: a memory cgroup charges it to the rank, and
 *   the writer syncs every OFFLOAD_DIRTY_WINDOW_BYTES ([Note: bounded dirty pages] in
 *   @fsdp-ts/checkpoint), so at most that much is dirty at once. Clean pages that reads leave in
 *   the cache are reclaimed at no risk and are not counted.
 * - `optimizerState: 'memory'`: the state moves to host memory, next to the device (FSDP1's
 *   `CPUOffload`, DeepSpeed's `offload_optimizer: cpu`), in the same two slots and stepped through
 *   the same staged chunks. It is `hostOptimizerStateBytes` (both slots), out of
 *   `deviceBytes` but still in `totalBytes`: on a CPU backend the device is host memory, and a
 *   memory cap (cgroup, `--memory-per-rank`) counts both, so the total is what the budget is
 *   compared with.
 * - `parameters: 'disk'`: the parameter shards live in files; a unit's shard is read before its
 *   all-gather, so the root's shard and the shards of the running unit and of the units read ahead
 *   (1 + OFFLOAD_PARAMETER_READ_AHEAD of the largest) stay through forward and backward, 4 bytes
 *   per element /W each (`parametersBytes`). The optimizer step reads every shard back and steps
 *   it in memory (FSDP does not see the step), so from the end of backward to the next step all
 *   4·owned bytes are resident again while nothing is gathered (`stepParametersBytes`); the
 *   device peak counts the larger of the two phases. Gradient shards stay in memory.
 * `diskBytes` is what the rank's offload files hold.
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
  /** FSDP's `offload` option (its `directory` is ignored here); default nothing offloaded. */
  readonly offload?: OffloadPlacement;
}

/** Where the optimizer state and the parameter shards live: FSDP's `offload` option. */
export interface OffloadPlacement {
  readonly optimizerState?: 'none' | 'memory' | 'disk';
  readonly parameters?: 'none' | 'disk';
  readonly directory?: string;
}

/** Bytes of optimizer state per chunk the offload streams (the engine's FSDP_OFFLOAD_CHUNK_BYTES default). */
export const OFFLOAD_CHUNK_BYTES = 64 * 2 ** 20;
/**
 * Chunks resident at once while streaming: two shared buffers, the reader thread filling one with
 * the next chunk while the optimizer steps the other (src/offload/offloaded-optimizer-state.ts).
 */
export const OFFLOAD_STAGED_CHUNKS = 2;
/**
 * Copies of the offloaded state the store keeps: a step reads one slot and writes the other, which
 * becomes current once every rank's writes succeeded (so a failed step changes nothing).
 */
export const OFFLOAD_SLOTS = 2;
/** Dirty page cache per rank at most: the writer syncs after this many bytes ([Note: bounded dirty pages]). */
export const OFFLOAD_DIRTY_WINDOW_BYTES = 64 * 2 ** 20;
/** Units whose parameter shards are read from disk ahead of the running one (parameters: 'disk'). */
export const OFFLOAD_PARAMETER_READ_AHEAD = 2;

/** The keys of MemoryEstimateRequest ([Note: option keys] in @fsdp-ts/errors). */
const memoryEstimateRequestKeys = {
  units: true,
  worldSize: true,
  strategy: true,
  optimizerStateBytesPerElement: true,
  offload: true,
} as const satisfies OptionKeys<MemoryEstimateRequest>;

const offloadPlacementKeys = {
  optimizerState: true,
  parameters: true,
  directory: true,
} as const satisfies OptionKeys<OffloadPlacement>;

/**
 * Bytes per rank by what holds them ([Note: memory model], [Note: memory with offload]):
 * parameters, gradients and optimizer state resident on the device, the gathered (unsharded)
 * units, the offload's staged chunks and dirty page cache, the optimizer state kept in host
 * memory, and their total (what a memory cap counts).
 */
export interface MemoryEstimate {
  readonly parametersBytes: number;
  /** With parameters on disk: every shard, resident again for the optimizer step (0 otherwise). */
  readonly stepParametersBytes: number;
  readonly gradientsBytes: number;
  readonly optimizerStateBytes: number;
  readonly gatheredBytes: number;
  /** Chunks of offloaded state and parameters staged while streaming (0 without disk offload). */
  readonly offloadStagingBytes: number;
  /** Page cache the offload's writes may keep dirty at once (0 without disk offload). */
  readonly pageCacheBytes: number;
  /** Optimizer state in host memory (`optimizerState: 'memory'`); counted in totalBytes. */
  readonly hostOptimizerStateBytes: number;
  /** totalBytes without hostOptimizerStateBytes: what sits beside the compute. */
  readonly deviceBytes: number;
  /** Everything above: the figure a rank's memory budget is compared with. */
  readonly totalBytes: number;
  /** Bytes the rank's offload files hold (not memory). */
  readonly diskBytes: number;
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
  if (request.offload !== undefined)
    checkFsdpOptionKeys('estimateMemoryPerRank offload', request.offload, offloadPlacementKeys);
  const { units, worldSize } = request;
  const settings = estimatedSettings(request.strategy);
  const shardParameters = settings.gradientReduction === 'reduce-scatter';
  const stateBytes = request.optimizerStateBytesPerElement ?? 8;
  const stateOn = request.offload?.optimizerState ?? 'none';
  const parametersOn = request.offload?.parameters ?? 'none';
  const total = units.reduce((sum, unit) => sum + unit.paddedNumel, 0);
  const owned = shardParameters ? total / worldSize : total;
  const others = units
    .filter((unit) => !unit.isRoot)
    .map((unit) => unit.paddedNumel)
    .sort((a, b) => b - a);
  const largest = (count: number) => others.slice(0, count).reduce((sum, numel) => sum + numel, 0);
  const root = units.find((unit) => unit.isRoot)?.paddedNumel ?? 0;
  let gatheredBytes = 0;
  if (settings.reshardAfterForward) gatheredBytes = 8 * (root + largest(UNITS_GATHERED_AT_ONCE));
  else if (shardParameters) gatheredBytes = 4 * total + 4 * largestUnit(units);
  // [Note: memory with offload]: shards read ahead of the running unit stay, of one rank's part.
  const residentParameterElements =
    parametersOn === 'disk'
      ? Math.min(
          owned,
          (root + largest(1 + OFFLOAD_PARAMETER_READ_AHEAD)) / (shardParameters ? worldSize : 1),
        )
      : owned;
  const parametersBytes = 4 * residentParameterElements;
  const stepParametersBytes = parametersOn === 'disk' ? 4 * owned : 0;
  const gradientsBytes = 4 * owned;
  const streamedBytesPerElement = (stateOn === 'disk' ? stateBytes : 0) + (parametersOn === 'disk' ? 4 : 0);
  const chunkElements = OFFLOAD_CHUNK_BYTES / stateBytes;
  const stagedBytesPerElement =
    stateOn === 'none' ? streamedBytesPerElement : stateBytes + (parametersOn === 'disk' ? 4 : 0);
  const offloadStagingBytes = stagedBytesPerElement * Math.min(owned, OFFLOAD_STAGED_CHUNKS * chunkElements);
  const pageCacheBytes =
    streamedBytesPerElement === 0 ? 0 : Math.min(OFFLOAD_DIRTY_WINDOW_BYTES, streamedBytesPerElement * owned);
  const optimizerStateBytes = stateOn === 'none' ? stateBytes * owned : 0;
  const hostOptimizerStateBytes = stateOn === 'memory' ? OFFLOAD_SLOTS * stateBytes * owned : 0;
  const deviceBytes =
    Math.max(parametersBytes + gatheredBytes, stepParametersBytes) +
    gradientsBytes +
    optimizerStateBytes +
    offloadStagingBytes +
    pageCacheBytes;
  return {
    parametersBytes,
    stepParametersBytes,
    gradientsBytes,
    optimizerStateBytes,
    gatheredBytes,
    offloadStagingBytes,
    pageCacheBytes,
    hostOptimizerStateBytes,
    deviceBytes,
    totalBytes: deviceBytes + hostOptimizerStateBytes,
    diskBytes: OFFLOAD_SLOTS * streamedBytesPerElement * owned,
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
  offload: OffloadPlacement = {},
): number | undefined {
  for (let worldSize = 1; worldSize <= 4096; worldSize *= 2) {
    // Padding differs a little per world size; the unpadded sizes are close enough to choose.
    const estimate = estimateMemoryPerRank({
      units,
      worldSize,
      strategy: 'full-shard',
      optimizerStateBytesPerElement,
      offload,
    });
    if (estimate.totalBytes <= limitBytes) return worldSize;
  }
  return undefined;
}
