/**
 * FullyShardedDataParallel that keeps the original parameters as views.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/fsdp
 */
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
export { type ResumePoint, resumeOrStart } from './checkpoint/resume-or-start';
export {
  type SaveCheckpointOptions,
  type SavedCheckpoint,
  saveCheckpoint,
} from './checkpoint/save-checkpoint';
export {
  type WriteCheckpointOptions,
  writeCheckpoint,
} from './checkpoint/write-checkpoint';
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
export type { FsdpOptions, ResolvedFsdpOptions } from './options';
export { type ExportSafetensorsOptions, exportSafetensors } from './safetensors/export-safetensors';
export { importSafetensors } from './safetensors/import-safetensors';
export { type FlatShard, flatShard, type ShardedModelState } from './sharded-state/flat-shard';
export type { SavedLocation } from './sharded-state/saved-parameters';
export {
  type GradientReduction,
  type ShardingPreset,
  type ShardingSettings,
  type ShardingStrategy,
  shardingPresets,
  shardingStrategies,
} from './sharding-strategy';
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
export { type SummonOptions, summonFullParams } from './summon-full-params';
export { type AutoWrapPolicy, type ModuleClass, selectUnitModules } from './wrap-policy';
