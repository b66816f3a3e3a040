/**
 * Sharded data-parallel training of tf.LayersModel across processes and hosts.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/layers
 */

// Train a tf.LayersModel across ranks: the trainer, its strategies and what fit takes.

export type { InitialWeights } from './internal/check-replicas';
export type { OptimizerFactory, OptimizerName, OptimizerOptions } from './internal/resolve-optimizer';
export { ShardedTrainer } from './sharded-trainer';
export type {
  BatchDataset,
  DatasetBatch,
  ShardedFitArgs,
  ShardedFitDatasetArgs,
  ShardedTrainerOptions,
  TensorData,
} from './sharded-trainer-options';
export { type ShardedTrainerStrategy, shardedTrainerStrategies } from './strategy';
export type { TrainerMemory } from './trainer-memory';

// Save and load the trainer's checkpoints.

export type { LoadedTrainerCheckpoint } from './checkpoint/load-sharded-checkpoint';
export type { SaveCheckpointArgs } from './checkpoint/save-sharded-checkpoint';
export { MODEL_DOCUMENT, TRAINER_DOCUMENT, type TrainerDocument } from './checkpoint/trainer-document';

// Errors.

export { LayersError, type LayersErrorCode, type LayersErrorDetails } from './errors';
