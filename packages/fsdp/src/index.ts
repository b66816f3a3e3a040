// @fsdp-ts/fsdp: FullyShardedDataParallel that keeps the original parameters as views.
export { FsdpError, type FsdpErrorCode, type FsdpErrorDetails } from './errors';
export { type CommunicationStatistics, FSDP, FullyShardedDataParallel } from './fully-sharded-data-parallel';
export {
  type FsdpOptions,
  type ResolvedFsdpOptions,
  type ShardingStrategy,
  shardingStrategies,
} from './options';
export { type AutoWrapPolicy, type ModuleClass, selectUnitModules } from './wrap-policy';
