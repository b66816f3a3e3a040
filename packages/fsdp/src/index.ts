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
  type OffloadableOptimizer,
  type OffloadStatistics,
  type WrapperActivity,
} from './fully-sharded-data-parallel';
export { type HybridShardGroups, hybridShardGroups } from './hybrid-shard';
export type { CommunicationDtype, MixedPrecision } from './mixed-precision';
export type { OffloadOptions, OffloadSettings } from './offload/offload-settings';
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
  type OffloadPlacement,
  smallestFittingWorldSize,
  type UnitSize,
} from './memory-estimate';
export { type RankMemoryLimit, rankMemoryLimit } from './memory-limit';
export { memoryWarning } from './memory-warning';

// Save and load checkpoints: sharded, atomic, checksummed, loadable on another world size.

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

// State dicts of the model and of the optimizer: full (on rank 0) or sharded (on every rank).

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
export { loadShardedStateDict, shardedStateDict } from './state-dict/sharded-state-dict';

// Exchange weights with other frameworks (safetensors).

export { type ExportSafetensorsOptions, exportSafetensors } from './safetensors/export-safetensors';
export { importSafetensors } from './safetensors/import-safetensors';

// The checkpoint format, its errors and the state-dict layouts live in @fsdp-ts/checkpoint (which
// @fsdp-ts/layers writes too); their names stay importable from here.

export {
  CHECKPOINT_FORMAT_VERSION,
  type CheckpointBuffer,
  type CheckpointDocument,
  type CheckpointEntry,
  CheckpointError,
  type CheckpointErrorDetails,
  type CheckpointErrorReason,
  type CheckpointLog,
  type CheckpointMetadata,
  type CheckpointOptimizer,
  type DataFileEntry,
  type FlatShard,
  FSDP_OPTIM_STATE_DICT_FORMAT,
  type FsdpOptimParameterState,
  type FsdpOptimStateDict,
  findLatestCheckpoint,
  flatShard,
  listCheckpoints,
  type OptimizerGroupDescription,
  type OptimizerReader,
  type Piece,
  type ReadCheckpointOptions,
  type ReplicatedState,
  readCheckpoint,
  type SavedLocation,
  type SavedOptimizer,
  type SavedParameterState,
  type SavedReplicatedState,
  type Segment,
  SHARDED_STATE_DICT_FORMAT,
  type ShardedHandleEntry,
  type ShardedModelState,
  type ShardedOptimizerState,
  type ShardedParameterEntry,
  type ShardedStateDict,
  type StagedOptimizerState,
  type StatefulOptimizer,
  type StatePiece,
  type StreamedPiece,
  type StreamedValues,
  type WriteCheckpointOptions,
  type WrittenPiece,
  writeCheckpoint,
} from '@fsdp-ts/checkpoint';

// Errors.

export { FsdpError, type FsdpErrorCode, type FsdpErrorDetails } from './errors';
