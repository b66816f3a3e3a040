/**
 * FullyShardedDataParallel that keeps the original parameters as views.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/fsdp
 */
// The serialization lives in @fsdp-ts/checkpoint; its names stay importable from here.
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
  type WriteCheckpointOptions,
  writeCheckpoint,
} from '@fsdp-ts/checkpoint';
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
export { clipGradNorm } from './clip-grad-norm';
export { FsdpError, type FsdpErrorCode, type FsdpErrorDetails } from './errors';
export {
  type CommunicationStatistics,
  type ForwardInputs,
  type ForwardOutput,
  FSDP,
  FullyShardedDataParallel,
  type WrapperActivity,
} from './fully-sharded-data-parallel';
export { type HybridShardGroups, hybridShardGroups } from './hybrid-shard';
export {
  estimateMemoryPerRank,
  type MemoryEstimate,
  type MemoryEstimateRequest,
  smallestFittingWorldSize,
  type UnitSize,
} from './memory-estimate';
export { type RankMemoryLimit, rankMemoryLimit } from './memory-limit';
export { memoryWarning } from './memory-warning';
export type { CommunicationDtype, MixedPrecision } from './mixed-precision';
export { runWithoutSync } from './no-sync';
export {
  type FullOptimStateDictOptions,
  fullOptimStateDict,
  loadFullOptimStateDict,
} from './optim-state-dict/full-optim-state-dict';
export {
  loadShardedOptimStateDict,
  shardedOptimStateDict,
} from './optim-state-dict/sharded-optim-state-dict';
export type { FsdpOptions, ResolvedFsdpOptions } from './options';
export { type ExportSafetensorsOptions, exportSafetensors } from './safetensors/export-safetensors';
export { importSafetensors } from './safetensors/import-safetensors';
export {
  type GradientReduction,
  type ShardingPreset,
  type ShardingSettings,
  type ShardingStrategy,
  shardingPresets,
  shardingStrategies,
} from './sharding-strategy';
export { type FullStateDictOptions, fullStateDict, loadFullStateDict } from './state-dict/full-state-dict';
export { loadShardedStateDict, shardedStateDict } from './state-dict/sharded-state-dict';
export { type SummonOptions, summonFullParams } from './summon-full-params';
export { type AutoWrapPolicy, type ModuleClass, selectUnitModules } from './wrap-policy';
