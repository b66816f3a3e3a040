import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import * as tf from '@tensorflow/tfjs-core';
import type { LayersModel } from '@tensorflow/tfjs-layers';
import type { BatchDataset } from '../sharded-trainer-options';
import { allReduceSumInPlace } from './all-reduce-sum';
import type { CompiledObjective } from './compiled-objective';
import { agreedBatches } from './dataset-batches';
import { WeightedMeans } from './epoch-logs';
import { batchRanges, localRange } from './global-batches';
import { applyModel } from './train-step';
import { type Batch, checkSplittable, sliceBatch } from './validate-data';

/** What evaluating across ranks needs from the trainer. */
export interface EvaluationContext {
  readonly model: LayersModel;
  readonly group: ProcessGroup;
  readonly objective: CompiledObjective;
  /** Why every rank needs a sample of every batch (synchronized batch norm, full-shard), or null. */
  readonly everyRankNeedsSamples: string | null;
  /** A dataset element as a checked batch of the model's inputs and outputs. */
  standardizeElement(element: unknown, what: string): Batch;
}

/**
 * This rank's loss and metrics on its slice of one global batch of `count` samples, weighted by
 * its share, summed across ranks: model.evaluate's values for that batch, on every rank.
 */
export function evaluateSlice(
  context: EvaluationContext,
  batch: Batch,
  start: number,
  count: number,
): Float32Array {
  const { group, objective } = context;
  const local = localRange(count, group.rank, group.size);
  const values = allocateShared(Float32Array, objective.names.length);
  const localCount = local.end - local.start;
  if (localCount > 0) {
    tf.tidy(() => {
      const slice = sliceBatch(batch, start + local.start, localCount);
      const outputs = applyModel(context.model, slice.xs, false);
      const share = localCount / count;
      const { loss, others } = objective.compute(slice.ys, outputs);
      values[0] = (loss.dataSync()[0] ?? 0) * share;
      others.forEach((value, index) => {
        values[1 + index] = (value.dataSync()[0] ?? 0) * share;
      });
    });
  }
  allReduceSumInPlace(group, values);
  return values;
}

/** Loss and metrics over every global batch of `batch` (model.evaluate's), names prefixed (`val_`). */
export function evaluateLogs(
  context: EvaluationContext,
  batch: Batch,
  batchSize: number,
  prefix: string,
): Record<string, number> {
  const means = new WeightedMeans();
  for (const range of batchRanges(batch.xs[0]!.shape[0]!, batchSize)) {
    const count = range.end - range.start;
    means.add(context.objective.names, [...evaluateSlice(context, batch, range.start, count)], count);
  }
  return means.means(prefix);
}

/** The same over a dataset whose elements are global batches (every rank iterates the same dataset). */
export async function evaluateDatasetLogs(
  context: EvaluationContext,
  dataset: BatchDataset,
  limit: number | undefined,
  prefix: string,
): Promise<Record<string, number>> {
  const { group } = context;
  const means = new WeightedMeans();
  const iterator = await dataset.iterator();
  for await (const batch of agreedBatches(iterator, group, limit, (element, what) =>
    context.standardizeElement(element, what),
  )) {
    const count = batch.xs[0]!.shape[0]!;
    checkSplittable(group, count, context.everyRankNeedsSamples, { validationBatch: count });
    means.add(context.objective.names, [...evaluateSlice(context, batch, 0, count)], count);
  }
  return means.means(prefix);
}
