/**
 * FullyShardedDataParallel that keeps the original parameters as views.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/fsdp
 */

// Wrap a model: the wrapper, its options, which modules become units, sharding strategies.

export {
  type CommunicationStatistics,
  type ForwardInputs,
  type ForwardOutput,
  FSDP,
  FullyShardedDataParallel,
  type WrapperActivity,
} from './fully-sharded-data-parallel';
export { type HybridShardGroups, hybridShardGroups } from './hybrid-shard';
export type { CommunicationDtype, MixedPrecision } from './mixed-precision';
export type { FsdpOptions, ResolvedFsdpOptions } from './options';
export {
  type GradientReduction,
  type ShardingPreset,
  type ShardingSettings,
  type ShardingStrategy,
  shardingPresets,
  shardingStrategies,
} from './sharding-strategy';
export { type AutoWrapPolicy, type ModuleClass, selectUnitModules } from './wrap-policy';

// Train: clip gradients, accumulate without reducing, see the full parameters.

export { clipGradNorm } from './clip-grad-norm';
export { runWithoutSync } from './no-sync';
export { type SummonOptions, summonFullParams } from './summon-full-params';

// Size a job: memory per rank, the smallest world size that fits, the rank's memory limit.

export {
  estimateMemoryPerRank,
  type MemoryEstimate,
  type MemoryEstimateRequest,
  smallestFittingWorldSize,
  type UnitSize,
} from './memory-estimate';
export { type RankMemoryLimit, rankMemoryLimit } from './memory-limit';
export { memoryWarning } from './memory-warning';

// Save and load checkpoints: sharded, atomic, checksummed, loadable on another world size.

export {
  type CheckpointEntry,
  type CheckpointLog,
  findLatestCheckpoint,
  listCheckpoints,
} from './checkpoint/checkpoint-directory';
export {
  CheckpointError,
  type CheckpointErrorDetails,
  type CheckpointErrorReason,
} from './checkpoint/checkpoint-error';
export {
  CHECKPOINT_FORMAT_VERSION,
  type CheckpointMetadata,
  type DataFileEntry,
  type SavedOptimizer,
  type SavedParameterState,
  type SavedReplicatedState,
  type Segment,
} from './checkpoint/checkpoint-format';
export {
  type LoadCheckpointOptions,
  type LoadedCheckpoint,
  loadCheckpoint,
} from './checkpoint/load-checkpoint';
export { type ResumePoint, resumeOrStart } from './checkpoint/resume-or-start';
export {
  type SaveCheckpointOptions,
  type SavedCheckpoint,
  saveCheckpoint,
} from './checkpoint/save-checkpoint';

// Write and read the checkpoint format from any flat layout (as @fsdp-ts/layers does).

export type {
  CheckpointOptimizer,
  OptimizerGroupDescription,
  ShardedOptimizerState,
  StatePiece,
} from './checkpoint/optimizer-state';
export {
  type OptimizerReader,
  type ReadCheckpointOptions,
  readCheckpoint,
  type StagedOptimizerState,
} from './checkpoint/read-checkpoint';
export type {
  CheckpointBuffer,
  CheckpointDocument,
  ReplicatedState,
} from './checkpoint/replicated-state';
export {
  type WriteCheckpointOptions,
  writeCheckpoint,
} from './checkpoint/write-checkpoint';
export { type FlatShard, flatShard, type ShardedModelState } from './sharded-state/flat-shard';
export type { SavedLocation } from './sharded-state/saved-parameters';

// State dicts of the model and of the optimizer: full (on rank 0) or sharded (on every rank).

export {
  FSDP_OPTIM_STATE_DICT_FORMAT,
  type FsdpOptimParameterState,
  type FsdpOptimStateDict,
  type StatefulOptimizer,
} from './optim-state-dict/fsdp-optim-state-dict';
export {
  type FullOptimStateDictOptions,
  fullOptimStateDict,
  loadFullOptimStateDict,
} from './optim-state-dict/full-optim-state-dict';
export {
  loadShardedOptimStateDict,
  shardedOptimStateDict,
} from './optim-state-dict/sharded-optim-state-dict';
export { type FullStateDictOptions, fullStateDict, loadFullStateDict } from './state-dict/full-state-dict';
export type { Piece } from './state-dict/pieces';
export {
  loadShardedStateDict,
  SHARDED_STATE_DICT_FORMAT,
  type ShardedHandleEntry,
  type ShardedParameterEntry,
  type ShardedStateDict,
  shardedStateDict,
} from './state-dict/sharded-state-dict';

// Exchange weights with other frameworks (safetensors).

export { type ExportSafetensorsOptions, exportSafetensors } from './safetensors/export-safetensors';
export { importSafetensors } from './safetensors/import-safetensors';

// Errors.

export { FsdpError, type FsdpErrorCode, type FsdpErrorDetails } from './errors';
