import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import * as tf from '@tensorflow/tfjs-core';
import type { LayersModel, LayerVariable } from '@tensorflow/tfjs-layers';
import { allReduceSumInPlace } from './all-reduce-sum';
import type { CompiledObjective } from './compiled-objective';
import type { FullShardLayers } from './full-shard-layers';
import { backingVariable, regularizationLosses } from './layer-access';
import type { OverlappedReduction } from './overlapped-reduction';
import type { Batch } from './validate-data';

/** The model's outputs for these inputs, always as an array (one per output). */
export function applyModel(model: LayersModel, inputs: readonly tf.Tensor[], training: boolean): tf.Tensor[] {
  const output = model.apply(inputs.length === 1 ? inputs[0]! : [...inputs], { training });
  return Array.isArray(output) ? (output as tf.Tensor[]) : [output as tf.Tensor];
}

export interface LocalGradients {
  gradients: Map<LayerVariable, tf.Tensor>;
  /** [loss, ...metrics] of the global batch, identical on every rank. */
  values: number[];
}

/**
 * [Note: loss scaling]
 * model.fit minimizes mean(loss over the batch) + regularization. Rank r holds n_r of the N
 * samples of the global batch, so it differentiates mean_r · n_r / N + regularization / W: the
 * sum over ranks of these is exactly model.fit's objective, hence summing the ranks' gradients
 * (all-reduce or reduce-scatter with op 'sum') gives model.fit's gradient even when the slices
 * are unequal (the last batch of an epoch). Metrics are averaged the same way (n_r / N weights).
 */
export function computeLocalGradients(
  model: LayersModel,
  objective: CompiledObjective,
  group: ProcessGroup,
  batch: Batch,
  localCount: number,
  globalCount: number,
  variables: readonly LayerVariable[],
  fullShard: FullShardLayers | null = null,
  overlap: OverlappedReduction | null = null,
): LocalGradients {
  const share = localCount / globalCount;
  const local = allocateShared(Float32Array, objective.names.length);
  fullShard?.beginStep();
  overlap?.beginStep();
  const differentiated =
    fullShard !== null
      ? [fullShard.anchor]
      : overlap !== null
        ? [overlap.anchor]
        : variables.map(backingVariable);
  const { value, grads } = tf.variableGrads(() => {
    // Overlapped: the weights are read through taps until the loss is built (regularizers read them too).
    const restore = overlap?.tapVariables() ?? (() => {});
    try {
      const outputs = applyModel(model, batch.xs, true);
      const objectiveValues = objective.compute(batch.ys, outputs);
      let loss = tf.mul(objectiveValues.loss, share) as tf.Scalar;
      objectiveValues.others.forEach((value, index) => {
        local[1 + index] = (value.dataSync()[0] ?? 0) * share;
      });
      for (const penalty of regularizationLosses(model)) loss = tf.add(loss, tf.div(penalty, group.size));
      return loss;
    } finally {
      restore();
    }
  }, differentiated);
  local[0] = value.dataSync()[0] ?? 0;
  value.dispose();
  const gradients = new Map<LayerVariable, tf.Tensor>();
  if (fullShard !== null) {
    // The weights' gradients went to the buckets through the taps (see [Note: full-shard layers]).
    fullShard.endStep();
    tf.dispose(Object.values(grads));
    allReduceSumInPlace(group, local);
    return { gradients, values: [...local] };
  }
  if (overlap !== null) {
    // The weights' gradients went to the buckets through the taps; some reductions are in flight
    // (see [Note: reductions overlapped with backward]). The rest are issued before the loss's.
    overlap.issueRemaining();
    tf.dispose(Object.values(grads));
    allReduceSumInPlace(group, local);
    return { gradients, values: [...local] };
  }
  allReduceSumInPlace(group, local);
  const byName = new Map(variables.map((variable) => [backingVariable(variable).name, variable] as const));
  for (const [name, gradient] of Object.entries(grads)) gradients.set(byName.get(name)!, gradient);
  return { gradients, values: [...local] };
}
