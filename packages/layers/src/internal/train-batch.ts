import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import type { BaseOptions, Optimizer } from '@fsdp-ts/optim';
import * as tf from '@tensorflow/tfjs-core';
import type { LayersModel, LayerVariable } from '@tensorflow/tfjs-layers';
import { allReduceSumInPlace } from './all-reduce-sum';
import type { CompiledObjective } from './compiled-objective';
import type { FullShardLayers } from './full-shard-layers';
import { gatherRows } from './gather-rows';
import { localRange } from './global-batches';
import { computeLocalGradients } from './train-step';
import type { Batch } from './validate-data';
import type { WeightBucket } from './weight-bucket';

/** What one training step uses of the trainer. */
export interface TrainBatchParts {
  readonly model: LayersModel;
  readonly group: ProcessGroup;
  readonly objective: CompiledObjective;
  readonly trainable: readonly LayerVariable[];
  readonly buckets: readonly WeightBucket[];
  /** 'full-shard' only (see [Note: full-shard layers]). */
  readonly fullShard: FullShardLayers | null;
  readonly optimizer: Optimizer<BaseOptions>;
}

/**
 * One optimizer step on the global batch `indices` of `batch`: this rank's slice of the rows, its
 * gradient ([Note: loss scaling]), the buckets' reductions, the optimizer step, and the write-back
 * of the new weights. Returns [loss, ...metrics] of the global batch, the same on every rank.
 */
export function trainBatch(parts: TrainBatchParts, batch: Batch, indices: Int32Array): number[] {
  const { group, objective, buckets, fullShard } = parts;
  const local = localRange(indices.length, group.rank, group.size);
  const localIndices = indices.subarray(local.start, local.end);
  let values: number[];
  if (localIndices.length === 0) {
    const zeros = allocateShared(Float32Array, objective.names.length);
    allReduceSumInPlace(group, zeros);
    values = [...zeros];
    for (const bucket of buckets) bucket.loadGradients(new Map());
  } else {
    const gather = (tensor: tf.Tensor) => gatherRows(tensor, localIndices);
    const localBatch = { xs: batch.xs.map(gather), ys: batch.ys.map(gather) };
    const result = computeLocalGradients(
      parts.model,
      objective,
      group,
      localBatch,
      localIndices.length,
      indices.length,
      parts.trainable,
      fullShard,
    );
    tf.dispose([...localBatch.xs, ...localBatch.ys]);
    if (fullShard === null) for (const bucket of buckets) bucket.loadGradients(result.gradients);
    tf.dispose([...result.gradients.values()]);
    values = result.values;
  }
  // Full-shard reduced each layer's gradient during the backward (see [Note: full-shard layers]).
  if (fullShard === null) {
    for (const bucket of buckets) bucket.startReduction();
    for (const bucket of buckets) bucket.finishReduction();
  }
  parts.optimizer.step();
  for (const bucket of buckets) bucket.writeBack();
  return values;
}
