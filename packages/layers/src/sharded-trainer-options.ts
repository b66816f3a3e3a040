import type { ProcessGroup } from '@fsdp-ts/collectives';
import type * as tf from '@tensorflow/tfjs-core';
import type { ModelCompileArgs, ModelFitArgs } from '@tensorflow/tfjs-layers';
import type { InitialWeights } from './internal/check-replicas';
import type { OptimizerFactory, OptimizerName, OptimizerOptions } from './internal/resolve-optimizer';
import type { ShardedTrainerStrategy } from './strategy';

export interface ShardedTrainerOptions {
  /** The process group to train over (`await initProcessGroup()` under fsdp-run or spawnThreadRanks). */
  group: ProcessGroup;
  /** 'sgd' | 'adam' | 'adamw' (with `optimizerOptions`), or a function building an @fsdp-ts/optim optimizer from the Parameters. */
  optimizer: OptimizerName | OptimizerFactory;
  /** Hyperparameters for a named optimizer, PyTorch names: `{ lr, betas, eps, weightDecay, momentum, ... }`. */
  optimizerOptions?: OptimizerOptions;
  /** Default 'shard-gradients'. See ShardedTrainerStrategy. */
  strategy?: ShardedTrainerStrategy;
  /** Loss (and `metrics`) as model.compile takes them; omitted: those of the model's own compile call. */
  loss?: ModelCompileArgs['loss'];
  metrics?: ModelCompileArgs['metrics'];
  /** 'broadcast' (default): rank 0's weights are copied to all ranks; 'check': they must already be equal. */
  initialWeights?: InitialWeights;
  /** Trainable weights are flattened in buckets of about this many bytes (one collective each). Default 25 MiB. */
  bucketSizeBytes?: number;
  /** Where rank 0 prints progress when fit's verbose is 1. Default console.log. */
  log?: (line: string) => void;
}

/** model.fit's arguments that ShardedTrainer.fit understands. */
export interface ShardedFitArgs {
  /** The global batch size (split across ranks). Default 32, as model.fit. */
  batchSize?: number;
  epochs?: number;
  initialEpoch?: number;
  /** 1 (default): rank 0 prints one line per epoch; 0: silent. */
  verbose?: 0 | 1;
  /** Shuffle the sample order each epoch (the same order on every rank). Default true, as model.fit. */
  shuffle?: boolean;
  /** Seed of the shuffle; default: a random seed rank 0 draws and broadcasts. */
  shuffleSeed?: number;
  validationData?: [tf.Tensor, tf.Tensor];
  /** Fraction of the samples (the last ones, before shuffling) held out for validation, as model.fit. */
  validationSplit?: number;
  callbacks?: ModelFitArgs['callbacks'];
}
