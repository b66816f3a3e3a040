import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { LayersModel, LayerVariable } from '@tensorflow/tfjs-layers';
import { LayersError } from '../errors';
import type { StrategySettings } from '../strategy';
import type { LayerUnit } from './full-shard-layers';
import { allLayers, hasRegularizers } from './layer-access';
import type { MemoryMeter } from './memory-meter';
import { WeightBucket } from './weight-bucket';

/** Consecutive trainable weights grouped into buckets of about `bucketSizeBytes` (the non-full-shard strategies). */
export function bucketize(variables: readonly LayerVariable[], bucketSizeBytes: number): LayerVariable[][] {
  const buckets: LayerVariable[][] = [];
  let current: LayerVariable[] = [];
  let bytes = 0;
  for (const variable of variables) {
    const size = variable.read().size * 4;
    if (current.length > 0 && bytes + size > bucketSizeBytes) {
      buckets.push(current);
      current = [];
      bytes = 0;
    }
    current.push(variable);
    bytes += size;
  }
  if (current.length > 0) buckets.push(current);
  return buckets;
}

/**
 * Full-shard units: each leaf layer owning trainable weights gets a bucket of exactly those
 * weights (the unit gathered while it runs). Regularized layers are refused (their penalties
 * read the weights after the layer ran, when they are released).
 */
export function layerUnits(
  model: LayersModel,
  trainable: readonly LayerVariable[],
  group: ProcessGroup,
  settings: StrategySettings,
  meter: MemoryMeter,
): LayerUnit[] {
  const wanted = new Set(trainable);
  const units: LayerUnit[] = [];
  const covered = new Set<LayerVariable>();
  for (const layer of allLayers(model)) {
    if (Array.isArray((layer as unknown as { layers?: unknown }).layers)) continue;
    const variables = layer.trainableWeights.filter(
      (variable) => wanted.has(variable) && !covered.has(variable),
    );
    if (variables.length === 0) continue;
    if (hasRegularizers(layer)) {
      throw new LayersError(
        `Layer ${layer.name} has a regularizer; 'full-shard' releases a layer's weights once it ran, and tfjs-layers computes regularization penalties from the weights after the forward.`,
        {
          code: 'unsupported-model',
          expected: "layers without kernelRegularizer / biasRegularizer under 'full-shard'",
          actual: layer.name,
          fix: "use 'shard-gradients' for this model, or drop the regularizer (AdamW's weightDecay is the usual replacement).",
        },
      );
    }
    for (const variable of variables) covered.add(variable);
    units.push({ layer, bucket: new WeightBucket(variables, group, settings, meter) });
  }
  const missing = trainable.find((variable) => !covered.has(variable));
  if (missing !== undefined) {
    throw new LayersError(`Trainable weight ${missing.name} belongs to no layer of the model.`, {
      code: 'unsupported-model',
      weight: missing.name,
      expected: "every trainable weight owned by one of the model's layers",
      actual: missing.name,
      fix: "use 'shard-gradients' for this model.",
    });
  }
  return units;
}
