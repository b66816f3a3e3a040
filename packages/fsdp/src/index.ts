// @fsdp-ts/fsdp: FullyShardedDataParallel that keeps the original parameters as views.
export {
  type CheckpointEntry,
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
  type Segment,
} from './checkpoint/checkpoint-format';
export {
  type LoadCheckpointOptions,
  type LoadedCheckpoint,
  loadCheckpoint,
} from './checkpoint/load-checkpoint';
export type { CheckpointOptimizer } from './checkpoint/optimizer-state';
export {
  type SaveCheckpointOptions,
  type SavedCheckpoint,
  saveCheckpoint,
} from './checkpoint/save-checkpoint';
export { FsdpError, type FsdpErrorCode, type FsdpErrorDetails } from './errors';
export { type CommunicationStatistics, FSDP, FullyShardedDataParallel } from './fully-sharded-data-parallel';
export {
  type FsdpOptions,
  type ResolvedFsdpOptions,
  type ShardingStrategy,
  shardingStrategies,
} from './options';
export { type ExportSafetensorsOptions, exportSafetensors } from './safetensors/export-safetensors';
export { importSafetensors } from './safetensors/import-safetensors';
export { type AutoWrapPolicy, type ModuleClass, selectUnitModules } from './wrap-policy';
