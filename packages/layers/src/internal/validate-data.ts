import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import * as tf from '@tensorflow/tfjs-core';
import { LayersError } from '../errors';
import type { ShardedFitArgs, TensorData } from '../sharded-trainer-options';

/** Inputs and targets as model.fit standardizes them: one tensor per model input / output, in order. */
export interface Batch {
  xs: tf.Tensor[];
  ys: tf.Tensor[];
}

export interface Split {
  train: Batch;
  validation: Batch | null;
}

function describe(value: unknown): string {
  if (value instanceof tf.Tensor) return `a tensor of shape [${value.shape}]`;
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'object') return `an object with keys ${Object.keys(value).join(', ') || '(none)'}`;
  return typeof value;
}

/**
 * x or y as model.fit takes them (a tensor, an array in the model's input/output order, or a map
 * from input/output name to tensor) → one tensor per name, in order.
 */
export function standardizeTensors(data: TensorData, names: readonly string[], what: string): tf.Tensor[] {
  const expected =
    names.length === 1
      ? 'a tf.Tensor (or an array of one, or { name: tensor })'
      : `an array of ${names.length} tensors in the order [${names.join(', ')}], or an object with those keys`;
  const fail = (detail: string): never => {
    throw new LayersError(`${what}: ${detail}; the model has ${names.length} (${names.join(', ')}).`, {
      code: 'invalid-data',
      expected,
      actual: describe(data),
      fix: `pass ${expected}.`,
    });
  };
  let tensors: unknown[];
  if (data instanceof tf.Tensor) tensors = [data];
  else if (Array.isArray(data)) tensors = data;
  else if (typeof data === 'object' && data !== null) {
    const map = data as Record<string, unknown>;
    const missing = names.filter((name) => !(name in map));
    if (missing.length > 0) fail(`no tensor for ${missing.join(', ')}`);
    tensors = names.map((name) => map[name]);
  } else tensors = [data];
  if (tensors.length !== names.length) fail(`${tensors.length} tensor(s) given`);
  tensors.forEach((tensor, index) => {
    if (!(tensor instanceof tf.Tensor))
      fail(`entry ${index} (${names[index]}) is ${describe(tensor)}, not a tf.Tensor`);
  });
  return tensors as tf.Tensor[];
}

/** Every input and target has the same first (sample) dimension, as model.fit checks. */
export function checkBatch(batch: Batch, what: string): number {
  const all = [...batch.xs, ...batch.ys];
  const scalar = all.find((tensor) => tensor.rank === 0);
  if (scalar !== undefined) {
    throw new LayersError(`${what}: a scalar tensor has no sample dimension.`, {
      code: 'invalid-data',
      expected: 'tensors whose first dimension is the sample index',
      actual: scalar.shape,
      fix: 'give every input and target a first (sample) dimension.',
    });
  }
  const xCount = batch.xs[0]!.shape[0]!;
  const yCount = batch.ys[0]!.shape[0]!;
  const xDiffers = batch.xs.find((tensor) => tensor.shape[0] !== xCount);
  const yDiffers = batch.ys.find((tensor) => tensor.shape[0] !== yCount);
  if (xDiffers !== undefined || yDiffers !== undefined) {
    const [which, first, other] =
      xDiffers !== undefined ? ['input', xCount, xDiffers] : ['target', yCount, yDiffers!];
    throw new LayersError(
      `${what}: all ${which} tensors should have the same number of samples. Got array sizes: ${first} and ${other.shape[0]}.`,
      {
        code: 'invalid-data',
        expected: `every ${which} with ${first} samples`,
        actual: other.shape,
        fix: `give every ${which} tensor the same first (sample) dimension.`,
      },
    );
  }
  if (xCount !== yCount) {
    throw new LayersError(
      `${what}: input tensors should have the same number of samples as target tensors. Found ${xCount} input sample(s) and ${yCount} target sample(s).`,
      {
        code: 'invalid-data',
        expected: 'x.shape[0] === y.shape[0]',
        actual: { x: batch.xs.map((tensor) => tensor.shape), y: batch.ys.map((tensor) => tensor.shape) },
        fix: 'give x and y the same first (sample) dimension.',
      },
    );
  }
  return xCount;
}

/** Rows [start, start + count) of every tensor of the batch. */
export function sliceBatch(batch: Batch, start: number, count?: number): Batch {
  const slice = (tensor: tf.Tensor) =>
    count === undefined ? tf.slice(tensor, start) : tf.slice(tensor, start, count);
  return { xs: batch.xs.map(slice), ys: batch.ys.map(slice) };
}

/** model.fit's validationData / validationSplit (the last fraction of the samples, before any shuffle). */
export function splitValidation(
  train: Batch,
  args: ShardedFitArgs,
  standardize: (x: TensorData, y: TensorData, what: string) => Batch,
): Split {
  checkBatch(train, 'fit(x, y)');
  if (args.validationData !== undefined) {
    const [validationX, validationY] = args.validationData;
    const validation = standardize(validationX, validationY, 'validationData');
    checkBatch(validation, 'validationData');
    return { train, validation };
  }
  const fraction = args.validationSplit ?? 0;
  if (!(fraction >= 0 && fraction < 1)) {
    throw new LayersError(`validationSplit must be in [0, 1); got ${fraction}.`, {
      code: 'invalid-option',
      expected: '0 <= validationSplit < 1',
      actual: fraction,
      fix: 'pass a fraction such as 0.1, or validationData.',
    });
  }
  if (fraction === 0) return { train, validation: null };
  const samples = train.xs[0]!.shape[0]!;
  const at = Math.floor(samples * (1 - fraction));
  return { train: sliceBatch(train, 0, at), validation: sliceBatch(train, at) };
}

export function checkBatchSize(batchSize: number): void {
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new LayersError(`batchSize must be a positive integer; got ${batchSize}.`, {
      code: 'invalid-option',
      expected: 'integer >= 1',
      actual: batchSize,
      fix: 'pass the global batch size, e.g. 32.',
    });
  }
}

/**
 * Every rank must pass the same number of samples (each takes its slice of the same global
 * batches); a synchronized BatchNormalization needs every rank to hold a sample of every batch.
 */
export function checkSampleCounts(
  group: ProcessGroup,
  batch: Batch,
  batchSize: number,
  /** Why every rank must hold a sample of every global batch, or null when it need not. */
  everyRankReason: string | null,
): void {
  const samples = checkBatch(batch, 'fit(x, y)');
  checkBatchSize(batchSize);
  const counts = allocateShared(Int32Array, group.size);
  if (group.size > 1) group.allGather(counts, new Int32Array([samples])).wait();
  else counts[0] = samples;
  const differing = counts.findIndex((count) => count !== counts[0]);
  if (differing >= 0) {
    throw new LayersError(
      `Ranks passed different numbers of samples: rank 0 has ${counts[0]}, rank ${differing} has ${counts[differing]}.`,
      {
        code: 'invalid-data',
        rank: differing,
        expected: 'the same (global) data set on every rank',
        actual: [...counts],
        fix: 'pass the whole data set to fit on every rank: each rank takes its own slice of every global batch.',
      },
    );
  }
  const smallest = samples % batchSize === 0 ? Math.min(batchSize, samples) : samples % batchSize;
  checkSplittable(group, smallest, everyRankReason, { samples, batchSize });
}

/** A global batch of `count` samples can give every rank a sample, when the trainer needs that. */
export function checkSplittable(
  group: ProcessGroup,
  count: number,
  everyRankReason: string | null,
  actual: unknown,
): void {
  if (everyRankReason !== null && count < group.size) {
    throw new LayersError(
      `A global batch of ${count} sample(s) cannot be split over ${group.size} ranks: ${everyRankReason}.`,
      {
        code: 'invalid-data',
        expected: `every global batch >= ${group.size} samples`,
        actual,
        fix: 'choose a batch size so that the last batch (samples % batchSize) is 0 or at least the world size, or drop the last samples.',
      },
    );
  }
}
