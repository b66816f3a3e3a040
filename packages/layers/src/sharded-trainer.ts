import type { SavedCheckpoint } from '@fsdp-ts/checkpoint';
import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import type { BaseOptions, Optimizer } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
import type { History, LayersModel, LayerVariable } from '@tensorflow/tfjs-layers';
import type { CheckpointSource } from './checkpoint/checkpoint-state';
import { type LoadedTrainerCheckpoint, loadShardedCheckpoint } from './checkpoint/load-sharded-checkpoint';
import {
  type SaveCheckpointArgs,
  saveCheckpointArgKeys,
  saveShardedCheckpoint,
} from './checkpoint/save-sharded-checkpoint';
import { LayersError } from './errors';
import { broadcastWeights } from './internal/broadcast-weights';
import { bucketize, layerUnits } from './internal/bucket-plan';
import { checkLayersOptionKeys } from './internal/check-option-keys';
import { checkReplicas } from './internal/check-replicas';
import { type CompiledObjective, compiledObjective } from './internal/compiled-objective';
import { agreedBatches, checkDatasetArgs, datasetPair, isDataset } from './internal/dataset-batches';
import { type EvaluationContext, evaluateDatasetLogs, evaluateLogs } from './internal/distributed-evaluation';
import { runEpochs, type TrainingPlan } from './internal/epoch-loop';
import { resolveSaveTarget } from './internal/file-save-handler';
import { FullShardLayers } from './internal/full-shard-layers';
import { batchRanges, epochOrder } from './internal/global-batches';
import { allLayers } from './internal/layer-access';
import { MemoryMeter } from './internal/memory-meter';
import { OverlappedReduction } from './internal/overlapped-reduction';
import { resolveOptimizer } from './internal/resolve-optimizer';
import { synchronizeBatchNorm } from './internal/synchronized-batch-norm';
import { type TrainBatchParts, trainBatch } from './internal/train-batch';
import {
  type Batch,
  checkBatch,
  checkBatchSize,
  checkSampleCounts,
  checkSplittable,
  splitValidation,
  standardizeTensors,
} from './internal/validate-data';
import { WeightBucket } from './internal/weight-bucket';
import {
  type BatchDataset,
  foreignTrainerNames,
  type ShardedFitArgs,
  type ShardedFitDatasetArgs,
  type ShardedTrainerOptions,
  shardedFitArgKeys,
  shardedFitDatasetArgKeys,
  shardedTrainerOptionKeys,
  type TensorData,
  tfjsFitNames,
} from './sharded-trainer-options';
import { resolveStrategy, type ShardedTrainerStrategy, type StrategySettings } from './strategy';
import { measureTrainerMemory, type TrainerMemory } from './trainer-memory';

type TrainerState = 'idle' | 'fitting' | 'disposed';

const defaultBucketSizeBytes = 25 * 1024 * 1024;

/**
 * Trains a tf.LayersModel on every rank of a process group, like model.fit on the global batch:
 * each rank computes the gradient of its slice of every global batch, the gradients are summed
 * across ranks through flat buckets (all-reduce or reduce-scatter, see ShardedTrainerStrategy),
 * and an @fsdp-ts/optim optimizer steps the full weights or this rank's shard, in place: the
 * model's variables live in the buckets' flat buffers ([Note: variables over the flat buffer]).
 * Whenever the trainer is idle every rank's model holds the same full weights, so
 * `model.predict`, `model.save` work as usual; under 'full-shard' they are whole only while
 * their layer runs during fit ([Note: full-shard layers]).
 */
export class ShardedTrainer {
  readonly model: LayersModel;
  readonly group: ProcessGroup;
  readonly strategy: ShardedTrainerStrategy;
  /** One Parameter per trainable weight (named as the weight), in the model's order. */
  readonly parameters: readonly Parameter[];
  readonly optimizer: Optimizer<BaseOptions>;
  private readonly settings: StrategySettings;
  private readonly pieces: { offsetInParam: number; length: number }[];
  private readonly buckets: WeightBucket[];
  private readonly meter = new MemoryMeter();
  /** 'full-shard' only: the per-layer gather/release machinery (see [Note: full-shard layers]). */
  private readonly fullShard: FullShardLayers | null;
  /** The other strategies: bucket reductions issued during backward ([Note: reductions overlapped with backward]). */
  private readonly overlap: OverlappedReduction | null;
  private readonly objective: CompiledObjective;
  private readonly trainable: readonly LayerVariable[];
  private readonly hasBatchNorm: boolean;
  private readonly log: (line: string) => void;
  private state: TrainerState = 'idle';
  /** Optimizer steps taken (set by loadCheckpoint); names checkpoint step directories. */
  private stepsTaken = 0;

  constructor(model: LayersModel, options: ShardedTrainerOptions) {
    checkLayersOptionKeys('ShardedTrainer', options, shardedTrainerOptionKeys, foreignTrainerNames);
    this.model = model;
    this.group = options.group;
    this.strategy = options.strategy ?? 'shard-gradients';
    this.settings = resolveStrategy(this.strategy);
    this.log = options.log ?? ((line) => console.log(line));
    if (options.loss !== undefined) {
      model.compile({
        optimizer: 'sgd',
        loss: options.loss,
        ...(options.metrics === undefined ? {} : { metrics: options.metrics }),
      });
    }
    this.objective = compiledObjective(model);
    for (const weight of model.weights) {
      if (weight.dtype !== 'float32') {
        throw new LayersError(
          `Weight ${weight.name} has dtype ${weight.dtype}; ShardedTrainer trains float32 weights.`,
          {
            code: 'unsupported-model',
            weight: weight.name,
            expected: 'float32',
            actual: weight.dtype,
            fix: 'build the model with float32 weights (the tfjs default).',
          },
        );
      }
    }
    const initialWeights = options.initialWeights ?? 'broadcast';
    checkReplicas(this.group, model, initialWeights);
    if (initialWeights === 'broadcast') broadcastWeights(this.group, model.weights);
    this.trainable = model.trainableWeights;
    if (this.trainable.length === 0) {
      throw new LayersError('The model has no trainable weights.', {
        code: 'unsupported-model',
        expected: 'at least one trainable weight',
        actual: 0,
        fix: 'build the model (model.build or one predict) and set trainable: true on the layers to train.',
      });
    }
    if (this.settings.shardParameters) {
      const units = layerUnits(model, this.trainable, this.group, this.settings, this.meter);
      this.buckets = units.map((unit) => unit.bucket);
      this.fullShard = new FullShardLayers(units);
    } else {
      this.buckets = bucketize(this.trainable, options.bucketSizeBytes ?? defaultBucketSizeBytes).map(
        (variables) => new WeightBucket(variables, this.group, this.settings, this.meter),
      );
      this.fullShard = null;
    }
    this.overlap =
      this.fullShard === null && (options.overlapGradientReduction ?? false)
        ? new OverlappedReduction(this.buckets)
        : null;
    // Parameters (and optimizer state, checkpoints) in the model's trainable-weight order, whatever the buckets.
    const byVariable = new Map<LayerVariable, [WeightBucket, number]>();
    for (const bucket of this.buckets)
      bucket.variables.forEach((variable, index) => {
        byVariable.set(variable, [bucket, index]);
      });
    const located = this.trainable.map((variable) => byVariable.get(variable)!);
    this.parameters = located.map(([bucket, index]) => bucket.parameters[index]!);
    this.pieces = located.map(([bucket, index]) => bucket.optimizerPieces()[index]!);
    this.optimizer = resolveOptimizer(options.optimizer, options.optimizerOptions ?? {}, [
      ...this.parameters,
    ]);
    this.hasBatchNorm = allLayers(model).some((layer) => layer.getClassName() === 'BatchNormalization');
  }

  /**
   * Trains like model.fit(x, y, args) on the global batches; every rank passes the same x and y
   * (a tensor, an array or a name map per input / output, as model.fit).
   */
  async fit(x: TensorData, y: TensorData, args: ShardedFitArgs = {}): Promise<History> {
    this.expectIdle('fit');
    checkLayersOptionKeys('ShardedTrainer.fit', args, shardedFitArgKeys, tfjsFitNames);
    const batchSize = args.batchSize ?? 32;
    const standardize = (xs: TensorData, ys: TensorData, what: string) => this.standardize(xs, ys, what);
    const { train, validation } = splitValidation(this.standardize(x, y, 'fit(x, y)'), args, standardize);
    checkSampleCounts(this.group, train, batchSize, this.everyRankNeedsSamples());
    const sampleCount = train.xs[0]!.shape[0]!;
    const seed = this.agreeOnSeed(args.shuffleSeed);
    const shuffle = args.shuffle ?? true;
    return this.train({
      epochs: args.epochs ?? 1,
      initialEpoch: args.initialEpoch ?? 0,
      verbose: args.verbose ?? 1,
      callbacks: args.callbacks,
      params: { samples: sampleCount, batchSize },
      doValidation: validation !== null,
      validate: () =>
        validation === null ? {} : evaluateLogs(this.evaluation(), validation, batchSize, 'val_'),
      batches: async function* (epoch) {
        const order = epochOrder(sampleCount, shuffle, seed, epoch);
        for (const range of batchRanges(sampleCount, batchSize))
          yield { batch: train, indices: order.subarray(range.start, range.end) };
      },
    });
  }

  /**
   * Trains like model.fitDataset(dataset, args): every element of the dataset is one *global*
   * batch, and every rank iterates the same dataset (the same elements in the same order: build
   * it the same way on every rank, with the same seeds), taking its slice of each batch. Ranks
   * check at each batch that they hold the same number of samples.
   */
  async fitDataset(dataset: BatchDataset, args: ShardedFitDatasetArgs): Promise<History> {
    this.expectIdle('fitDataset');
    checkLayersOptionKeys('ShardedTrainer.fitDataset', args, shardedFitDatasetArgKeys, tfjsFitNames);
    checkDatasetArgs(dataset, args);
    const validationData = args.validationData;
    const validationBatchSize = args.validationBatchSize ?? 32;
    let validation: (() => Record<string, number> | Promise<Record<string, number>>) | null = null;
    if (validationData !== undefined && isDataset(validationData)) {
      validation = () =>
        evaluateDatasetLogs(this.evaluation(), validationData, args.validationBatches, 'val_');
    } else if (validationData !== undefined) {
      const batch = this.standardize(validationData[0], validationData[1], 'validationData');
      checkBatch(batch, 'validationData');
      checkBatchSize(validationBatchSize);
      validation = () => evaluateLogs(this.evaluation(), batch, validationBatchSize, 'val_');
    }
    const shared = args.batchesPerEpoch === undefined ? null : await dataset.iterator();
    const datasetBatches = (iterator: Awaited<ReturnType<BatchDataset['iterator']>>, limit?: number) =>
      agreedBatches(iterator, this.group, limit, (element, what) => this.standardizeElement(element, what));
    let exhausted = false;
    const group = this.group;
    const everyRank = this.everyRankNeedsSamples();
    const history = await this.train({
      epochs: args.epochs,
      initialEpoch: args.initialEpoch ?? 0,
      verbose: args.verbose ?? 1,
      callbacks: args.callbacks,
      params: { steps: args.batchesPerEpoch ?? null, samples: null, batchSize: null },
      doValidation: validation !== null,
      validate: async () => (validation === null ? {} : await validation()),
      batches: async function* () {
        const iterator = shared ?? (await dataset.iterator());
        let count = 0;
        for await (const batch of datasetBatches(iterator, args.batchesPerEpoch)) {
          checkSplittable(group, batch.xs[0]!.shape[0]!, everyRank, { batch: count });
          count++;
          yield { batch, indices: null };
        }
        if (shared !== null && count < args.batchesPerEpoch!) exhausted = true;
      },
      interrupted: () => exhausted,
    });
    if (exhausted && this.group.rank === 0 && args.verbose !== 0) {
      this.log(
        `The dataset ran out of data before ${args.epochs} epochs of ${args.batchesPerEpoch} batches; training was interrupted (as model.fitDataset does). Use dataset.repeat() to train longer.`,
      );
    }
    return history;
  }

  /** The epoch loop shared by fit and fitDataset (internal/epoch-loop.ts), around the trainer's fitting state. */
  private train(plan: TrainingPlan): Promise<History> {
    return runEpochs(
      {
        model: this.model,
        group: this.group,
        names: this.objective.names,
        log: this.log,
        trainBatch: (batch, rows) => {
          const values = trainBatch(this.trainBatchParts(), batch, rows);
          this.stepsTaken++;
          return values;
        },
        agreeToStop: () => this.agreeToStop(),
        beginTraining: () => {
          this.state = 'fitting';
          this.adoptVariables();
          const restoreBatchNorm = synchronizeBatchNorm(this.model, this.group);
          const restoreLayers = this.fullShard?.install() ?? (() => {});
          for (const bucket of this.buckets) bucket.setResident(false);
          this.meter.resetPeak();
          this.model.stopTraining = false;
          return () => {
            restoreLayers();
            restoreBatchNorm();
            // Full-shard: the model's variables hold their whole values again between fits (predict, save).
            for (const bucket of this.buckets) bucket.setResident(true);
            this.state = 'idle';
          };
        },
      },
      plan,
    );
  }

  /**
   * Loss and metrics of the model on (x, y), computed across ranks (each evaluates its slice of
   * every batch), as model.evaluate's values; the same on every rank.
   */
  evaluate(x: TensorData, y: TensorData, args: { batchSize?: number } = {}): Record<string, number> {
    this.expectIdle('evaluate');
    checkLayersOptionKeys('ShardedTrainer.evaluate', args, { batchSize: true });
    const batch = this.standardize(x, y, 'evaluate(x, y)');
    checkSampleCounts(this.group, batch, args.batchSize ?? 32, null);
    this.adoptVariables();
    return evaluateLogs(this.evaluation(), batch, args.batchSize ?? 32, '');
  }

  /**
   * Saves the model in the ordinary tfjs format from rank 0 (loadable by tf.loadLayersModel with no
   * fsdp-ts code); every rank must call it. Every rank's model holds the full, identical weights
   * after each step, so nothing is gathered. `file://dir` works without tfjs-node too (model.json +
   * weights.bin, tfjs-node's layout). Resolves with the save result on rank 0, null elsewhere.
   */
  async save(handlerOrUrl: tf.io.IOHandler | string): Promise<tf.io.SaveResult | null> {
    this.expectIdle('save');
    const result = this.group.rank === 0 ? await this.model.save(resolveSaveTarget(handlerOrUrl)) : null;
    await this.group.barrier();
    return result;
  }

  /**
   * Frees what the trainer allocated in tfjs (the variable its gradient taps differentiate, under
   * 'full-shard' or overlapGradientReduction); the model and its weights stay usable. Not during
   * a fit. Later calls on the trainer throw; dispose() again does nothing.
   */
  dispose(): void {
    if (this.state === 'disposed') return;
    this.expectIdle('dispose');
    this.overlap?.dispose();
    this.fullShard?.dispose();
    this.state = 'disposed';
  }

  /** Optimizer steps taken by this trainer (restored by loadCheckpoint). */
  get steps(): number {
    return this.stepsTaken;
  }

  /**
   * Writes a checkpoint in @fsdp-ts/checkpoint's format (the one @fsdp-ts/fsdp writes) under `directory` (shared by all ranks):
   * `directory/step-NNNNNNNN/` (default: the steps taken) and `directory/latest`; each rank writes
   * its slice of the weights and of the optimizer state, rank 0 the batch-norm statistics and the
   * model topology (see [Note: layers checkpoint layout]). Keeps `keep` (default 1) checkpoints.
   * Loads at any world size and strategy. Every rank must call it.
   */
  async saveCheckpoint(directory: string, args: SaveCheckpointArgs = {}): Promise<SavedCheckpoint> {
    this.expectIdle('saveCheckpoint');
    checkLayersOptionKeys('ShardedTrainer.saveCheckpoint', args, saveCheckpointArgKeys);
    this.adoptVariables();
    return saveShardedCheckpoint(directory, this.checkpointSource(), args);
  }

  /**
   * Loads a checkpoint written by saveCheckpoint (any world size or strategy): a step directory,
   * or the newest under `directory`. Every rank must call it.
   */
  async loadCheckpoint(directory: string): Promise<LoadedTrainerCheckpoint> {
    this.expectIdle('loadCheckpoint');
    this.adoptVariables();
    const loaded = loadShardedCheckpoint(directory, this.checkpointSource(), this.log);
    this.stepsTaken = loaded.steps;
    return loaded;
  }

  private checkpointSource(): CheckpointSource {
    return {
      model: this.model,
      group: this.group,
      strategy: this.strategy,
      optimizerOnShard: this.settings.optimizerOnShard,
      optimizer: this.optimizer,
      buckets: this.buckets,
      parameters: this.parameters,
      pieces: this.pieces,
      steps: this.stepsTaken,
    };
  }

  /**
   * What this rank holds for training, in bytes, against the strategy's model (see TrainerMemory):
   * now, and the most held at once since the last fit began (the peak, for 'full-shard', includes
   * the layer gathered while it runs).
   */
  memory(): TrainerMemory {
    return measureTrainerMemory({
      strategy: this.strategy,
      settings: this.settings,
      worldSize: this.group.size,
      optimizer: this.optimizer,
      buckets: this.buckets,
      meter: this.meter,
      gathersLayers: this.fullShard !== null,
    });
  }

  private trainBatchParts(): TrainBatchParts {
    return {
      model: this.model,
      group: this.group,
      objective: this.objective,
      trainable: this.trainable,
      buckets: this.buckets,
      fullShard: this.fullShard,
      overlap: this.overlap,
      optimizer: this.optimizer,
    };
  }

  /** What the evaluation helpers need (see internal/distributed-evaluation.ts). */
  private evaluation(): EvaluationContext {
    return {
      model: this.model,
      group: this.group,
      objective: this.objective,
      everyRankNeedsSamples: this.everyRankNeedsSamples(),
      standardizeElement: (element, what) => this.standardizeElement(element, what),
    };
  }

  private standardize(x: TensorData, y: TensorData, what: string): Batch {
    return {
      xs: standardizeTensors(x, this.objective.inputNames, `${what}: x`),
      ys: standardizeTensors(y, this.objective.outputNames, `${what}: y`),
    };
  }

  private standardizeElement(element: unknown, what: string): Batch {
    const pair = datasetPair(element, what);
    const batch = this.standardize(pair[0], pair[1], what);
    checkBatch(batch, what);
    return batch;
  }

  private agreeOnSeed(requested: number | undefined): number {
    const seed = allocateShared(Int32Array, 1);
    seed[0] = requested ?? Math.floor(Math.random() * 2 ** 31);
    if (this.group.size > 1) this.group.broadcast(seed, { root: 0 }).wait();
    return seed[0]!;
  }

  /** Every rank stops if any rank's callbacks asked to (model.stopTraining), so all stop at the same epoch. */
  private agreeToStop(): boolean {
    const flag = allocateShared(Int32Array, 1);
    flag[0] = this.model.stopTraining ? 1 : 0;
    if (this.group.size > 1) this.group.allReduce(flag, { op: 'max' }).wait();
    return flag[0] === 1;
  }

  /** Variables assigned from outside (model.setWeights, a checkpoint) are copied back into the buckets. */
  private adoptVariables(): void {
    for (const bucket of this.buckets) bucket.adoptVariables();
  }

  /**
   * Synchronized batch norm and full-shard's per-layer collectives need every rank in every
   * batch's forward and backward.
   */
  private everyRankNeedsSamples(): string | null {
    if (this.fullShard !== null) return "'full-shard' gathers each layer's weights with all ranks";
    if (this.hasBatchNorm) return 'every rank needs a sample for the synchronized batch statistics';
    return null;
  }

  private expectIdle(method: string): void {
    if (this.state === 'disposed') {
      throw new LayersError(`ShardedTrainer.${method}() was called after dispose().`, {
        code: 'invalid-option',
        expected: 'a trainer not disposed',
        actual: 'disposed',
        fix: 'construct a new ShardedTrainer for the model.',
      });
    }
    if (this.state !== 'idle') {
      throw new LayersError(`ShardedTrainer.${method}() was called while the trainer is ${this.state}.`, {
        code: 'invalid-option',
        expected: 'idle',
        actual: this.state,
        fix: `await the running fit() before calling ${method}().`,
      });
    }
  }
}
