import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import * as tf from '@tensorflow/tfjs-core';
import { LayersError } from '../errors';
import type { BatchDataset, ShardedFitDatasetArgs, TensorData } from '../sharded-trainer-options';
import type { Batch } from './validate-data';

type Iterator = Awaited<ReturnType<BatchDataset['iterator']>>;

export function isDataset(value: unknown): value is BatchDataset {
  return (
    typeof value === 'object' && value !== null && typeof (value as BatchDataset).iterator === 'function'
  );
}

export function checkDatasetArgs(dataset: unknown, args: ShardedFitDatasetArgs | undefined): void {
  if (!isDataset(dataset)) {
    throw new LayersError('fitDataset expects a tf.data.Dataset (an object with iterator()).', {
      code: 'invalid-data',
      expected: 'a dataset whose elements are global batches { xs, ys }',
      actual: typeof dataset,
      fix: 'pass tf.data.array(...).batch(globalBatchSize) or any dataset of { xs, ys } batches; use fit(x, y) for tensors.',
    });
  }
  const epochs = args?.epochs;
  if (epochs === undefined || !Number.isInteger(epochs) || epochs < 1) {
    throw new LayersError(`fitDataset needs args.epochs, a positive integer; got ${epochs}.`, {
      code: 'invalid-option',
      expected: 'integer >= 1',
      actual: epochs,
      fix: 'pass { epochs: N } (model.fitDataset requires it too).',
    });
  }
  const perEpoch = args!.batchesPerEpoch;
  if (perEpoch !== undefined && (!Number.isInteger(perEpoch) || perEpoch < 1)) {
    throw new LayersError(`batchesPerEpoch must be a positive integer; got ${perEpoch}.`, {
      code: 'invalid-option',
      expected: 'integer >= 1, or omitted (the whole dataset each epoch)',
      actual: perEpoch,
      fix: 'pass a positive number of batches, or leave it out.',
    });
  }
}

/** `{ xs, ys }` or `[xs, ys]`, as model.fitDataset's elements. */
export function datasetPair(element: unknown, what: string): [TensorData, TensorData] {
  if (Array.isArray(element) && element.length === 2) return [element[0], element[1]];
  if (typeof element === 'object' && element !== null && 'xs' in element && 'ys' in element) {
    const { xs, ys } = element as { xs: TensorData; ys: TensorData };
    return [xs, ys];
  }
  throw new LayersError(`${what}: a dataset element must be { xs, ys } (or [xs, ys]).`, {
    code: 'invalid-data',
    expected: '{ xs, ys }: one global batch of inputs and targets',
    actual: element instanceof tf.Tensor ? `a tensor of shape [${element.shape}]` : typeof element,
    fix: 'map the dataset to { xs, ys } pairs, e.g. dataset.map(({ x, y }) => ({ xs: x, ys: y })).batch(n).',
  });
}

/**
 * [Note: dataset batches]
 * Every rank iterates its own copy of the same dataset; each element is one global batch, of
 * which each rank trains on its slice. Before each batch the ranks exchange its size (-1 once the
 * iterator is done), so a rank whose dataset differs in length or batch size fails on every rank
 * with the sizes named, instead of hanging in a collective. The element's tensors are disposed
 * after use (tf.data datasets make fresh tensors for every element).
 */
export async function* agreedBatches(
  iterator: Iterator,
  group: ProcessGroup,
  limit: number | undefined,
  standardize: (element: unknown, what: string) => Batch,
): AsyncGenerator<Batch> {
  for (let index = 0; limit === undefined || index < limit; index++) {
    const next = await iterator.next();
    const what = `dataset batch ${index}`;
    const batch = next.done === true ? null : standardize(next.value, what);
    const size = batch === null ? -1 : batch.xs[0]!.shape[0]!;
    const sizes = allocateShared(Int32Array, group.size);
    if (group.size > 1) group.allGather(sizes, new Int32Array([size])).wait();
    else sizes[0] = size;
    const differing = sizes.findIndex((other) => other !== sizes[0]);
    if (differing >= 0) {
      if (batch !== null) tf.dispose([...batch.xs, ...batch.ys]);
      const shown = (value: number) => (value < 0 ? 'no batch (the dataset ended)' : `${value} samples`);
      throw new LayersError(
        `${what}: the ranks' datasets differ: rank 0 has ${shown(sizes[0]!)}, rank ${differing} has ${shown(sizes[differing]!)}.`,
        {
          code: 'invalid-data',
          rank: differing,
          expected: 'the same dataset (same elements, same order) on every rank',
          actual: [...sizes],
          fix: 'build the dataset identically on every rank (same data, same shuffle seed): each element is a global batch that the ranks split.',
        },
      );
    }
    if (batch === null) return;
    try {
      yield batch;
    } finally {
      tf.dispose([...batch.xs, ...batch.ys]);
    }
  }
}
