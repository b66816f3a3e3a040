import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { ForeignNames, OptionKeys } from '@fsdp-ts/errors';
import type * as tf from '@tensorflow/tfjs-core';
import type { ModelCompileArgs, ModelFitArgs } from '@tensorflow/tfjs-layers';
import type { InitialWeights } from './internal/check-replicas';
import type { OptimizerFactory, OptimizerName, OptimizerOptions } from './internal/resolve-optimizer';
import type { ShardedTrainerStrategy } from './strategy';

/** Options of ShardedTrainer: the process group, the optimizer, the strategy, loss and metrics. */
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
  /**
   * 'replicate', 'shard-optimizer', 'shard-gradients': start each bucket's all-reduce (or
   * reduce-scatter) during the backward, as soon as its gradients are in, instead of after it.
   * Default false: the result is identical either way, and on a 2-core machine with 2 ranks the
   * overlapped schedule was not faster (the communication thread competes with the backward for
   * the cores; see the decision record 2026-12-01-layers-overlapped-reduction.md). It needs several
   * buckets (lower `bucketSizeBytes`). 'full-shard' always reduces each layer during the backward.
   */
  overlapGradientReduction?: boolean;
  /** Where rank 0 prints progress when fit's verbose is 1. Default console.log. */
  log?: (line: string) => void;
}

/**
 * Inputs or targets as model.fit takes them: a tensor (one input / output), an array of tensors in
 * the model's input (output) order, or an object from input (output) name to tensor.
 */
export type TensorData = tf.Tensor | tf.Tensor[] | { [name: string]: tf.Tensor };

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
  validationData?: [TensorData, TensorData];
  /** Fraction of the samples (the last ones, before shuffling) held out for validation, as model.fit. */
  validationSplit?: number;
  callbacks?: ModelFitArgs['callbacks'];
}

/**
 * One element of a fitDataset dataset: one *global* batch, as model.fitDataset takes it
 * (`{ xs, ys }`, each a tensor, an array or a name map), or an `[xs, ys]` pair.
 */
export type DatasetBatch = { xs: TensorData; ys: TensorData } | [TensorData, TensorData];

/** What fitDataset reads of a tf.data.Dataset (its `iterator()`); any object with one works. */
export interface BatchDataset {
  /** An iterator over the dataset's batches (as tf.data.Dataset's). */
  iterator(): Promise<{
    /** The next batch, or `done` after the last. */
    next(): Promise<IteratorResult<unknown>>;
  }>;
}

/** model.fitDataset's arguments that ShardedTrainer.fitDataset understands. */
export interface ShardedFitDatasetArgs {
  epochs: number;
  /**
   * Batches per epoch; omitted: the whole dataset each epoch (a new iterator per epoch). Given:
   * one iterator for the whole training, as model.fitDataset; training stops (every rank) when it
   * runs out.
   */
  batchesPerEpoch?: number;
  initialEpoch?: number;
  verbose?: 0 | 1;
  /** [x, y] tensors (split into batches of `validationBatchSize`), or a dataset of global batches. */
  validationData?: [TensorData, TensorData] | BatchDataset;
  validationBatchSize?: number;
  /** Batches of a validation dataset to use; omitted: all of it. */
  validationBatches?: number;
  callbacks?: ModelFitArgs['callbacks'];
}

/** The keys of ShardedTrainerOptions ([Note: option keys] in @fsdp-ts/errors). */
export const shardedTrainerOptionKeys = {
  group: true,
  optimizer: true,
  optimizerOptions: true,
  strategy: true,
  loss: true,
  metrics: true,
  initialWeights: true,
  bucketSizeBytes: true,
  overlapGradientReduction: true,
  log: true,
} as const satisfies OptionKeys<ShardedTrainerOptions>;

/** PyTorch DDP/FSDP and tfjs names a ShardedTrainer user may write, with what it calls them. */
export const foreignTrainerNames: ForeignNames = {
  process_group: 'group here',
  sharding_strategy: "strategy here: 'replicate', 'shard-optimizer', 'shard-gradients' or 'full-shard'",
  lr: 'the learning rate goes in optimizerOptions: { lr }',
  learningRate: 'the learning rate goes in optimizerOptions: { lr }',
  bucket_cap_mb: 'bucketSizeBytes here, in bytes',
  broadcast_buffers: "initialWeights here: 'broadcast' (rank 0's weights, the default) or 'check'",
  find_unused_parameters: 'no equivalent: weights without a gradient are skipped; remove it',
  gradient_as_bucket_view: 'no equivalent: gradients already live in the reduction buckets; remove it',
  static_graph: 'no equivalent; remove it',
};

/** The keys of ShardedFitArgs. */
export const shardedFitArgKeys = {
  batchSize: true,
  epochs: true,
  initialEpoch: true,
  verbose: true,
  shuffle: true,
  shuffleSeed: true,
  validationData: true,
  validationSplit: true,
  callbacks: true,
} as const satisfies OptionKeys<ShardedFitArgs>;

/** The keys of ShardedFitDatasetArgs. */
export const shardedFitDatasetArgKeys = {
  epochs: true,
  batchesPerEpoch: true,
  initialEpoch: true,
  verbose: true,
  validationData: true,
  validationBatchSize: true,
  validationBatches: true,
  callbacks: true,
} as const satisfies OptionKeys<ShardedFitDatasetArgs>;

/** tfjs's model.fit / fitDataset arguments that ShardedTrainer does not take. */
export const tfjsFitNames: ForeignNames = {
  stepsPerEpoch: 'fitDataset takes batchesPerEpoch; fit(x, y) trains on all of x and y each epoch',
  validationSteps: 'fitDataset takes validationBatches; fit validates on all of validationData',
  classWeight: 'not supported by ShardedTrainer; weight the loss instead',
  sampleWeight: 'not supported by ShardedTrainer; weight the loss instead',
  yieldEvery: 'no equivalent; remove it',
};
