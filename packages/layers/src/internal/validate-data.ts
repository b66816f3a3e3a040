import type { ProcessGroup } from '@fsdp-ts/collectives';
import * as tf from '@tensorflow/tfjs-core';
import { LayersError } from '../errors';
import type { ShardedFitArgs } from '../sharded-trainer-options';

export interface Split {
  train: { x: tf.Tensor; y: tf.Tensor };
  validation: { x: tf.Tensor; y: tf.Tensor } | null;
}

function checkPair(x: tf.Tensor, y: tf.Tensor, what: string): void {
  if (!(x instanceof tf.Tensor) || !(y instanceof tf.Tensor)) {
    throw new LayersError(`${what} must be two tf.Tensors (one input, one target).`, {
      code: 'invalid-data',
      expected: 'tf.Tensor, tf.Tensor',
      actual: `${Array.isArray(x) ? 'array' : typeof x}, ${Array.isArray(y) ? 'array' : typeof y}`,
      fix: 'pass tensors whose first dimension is the sample index; models with several inputs or outputs are not supported.',
    });
  }
  if (x.rank === 0 || y.rank === 0 || x.shape[0] !== y.shape[0]) {
    throw new LayersError(
      `${what}: input tensors should have the same number of samples as target tensors. Found ${x.shape[0]} input sample(s) and ${y.shape[0]} target sample(s).`,
      {
        code: 'invalid-data',
        expected: 'x.shape[0] === y.shape[0]',
        actual: { x: x.shape, y: y.shape },
        fix: 'give x and y the same first (sample) dimension.',
      },
    );
  }
}

/** model.fit's validationData / validationSplit (the last fraction of the samples, before any shuffle). */
export function splitValidation(x: tf.Tensor, y: tf.Tensor, args: ShardedFitArgs): Split {
  checkPair(x, y, 'fit(x, y)');
  if (args.validationData !== undefined) {
    const [validationX, validationY] = args.validationData;
    checkPair(validationX, validationY, 'validationData');
    return { train: { x, y }, validation: { x: validationX, y: validationY } };
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
  if (fraction === 0) return { train: { x, y }, validation: null };
  const samples = x.shape[0]!;
  const at = Math.floor(samples * (1 - fraction));
  return {
    train: { x: tf.slice(x, 0, at), y: tf.slice(y, 0, at) },
    validation: { x: tf.slice(x, at), y: tf.slice(y, at) },
  };
}

/**
 * Every rank must pass the same number of samples (each takes its slice of the same global
 * batches); a synchronized BatchNormalization needs every rank to hold a sample of every batch.
 */
export function checkSampleCounts(
  group: ProcessGroup,
  x: tf.Tensor,
  y: tf.Tensor,
  batchSize: number,
  /** Why every rank must hold a sample of every global batch, or null when it need not. */
  everyRankReason: string | null,
): void {
  checkPair(x, y, 'fit(x, y)');
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new LayersError(`batchSize must be a positive integer; got ${batchSize}.`, {
      code: 'invalid-option',
      expected: 'integer >= 1',
      actual: batchSize,
      fix: 'pass the global batch size, e.g. 32.',
    });
  }
  const samples = x.shape[0]!;
  const counts = new Int32Array(new SharedArrayBuffer(4 * group.size));
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
  if (everyRankReason !== null && smallest < group.size) {
    throw new LayersError(
      `A global batch of ${smallest} sample(s) cannot be split over ${group.size} ranks: ${everyRankReason}.`,
      {
        code: 'invalid-data',
        expected: `every global batch >= ${group.size} samples`,
        actual: { samples, batchSize },
        fix: 'choose a batch size so that the last batch (samples % batchSize) is 0 or at least the world size, or drop the last samples.',
      },
    );
  }
}
