import { type FlatShard, flatShard, type ShardedModelState } from '@fsdp-ts/checkpoint';
import type { ProcessGroup } from '@fsdp-ts/collectives';
import { computeFlatParamLayout, withWorldSize } from '@fsdp-ts/flat-param';
import type { BaseOptions, Optimizer } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import type { LayersModel, LayerVariable } from '@tensorflow/tfjs-layers';
import type { WeightBucket } from '../internal/weight-bucket';

/** What the trainer hands the checkpoint code (an idle trainer: every bucket's full buffer is resident). */
export interface CheckpointSource {
  model: LayersModel;
  group: ProcessGroup;
  strategy: string;
  /** Whether each rank's optimizer steps only its shard of each bucket (every strategy but 'replicate'). */
  optimizerOnShard: boolean;
  optimizer: Optimizer<BaseOptions>;
  buckets: readonly WeightBucket[];
  /** Per trainable weight (the model's order): its Parameter, and the part this rank's optimizer steps. */
  parameters: readonly Parameter[];
  pieces: readonly { offsetInParam: number; length: number }[];
  /** Optimizer steps taken so far (names the step directory). */
  steps: number;
}

/**
 * [Note: layers checkpoint names]
 * A layers checkpoint is an fsdp checkpoint (see [Note: checkpoint layout] in @fsdp-ts/checkpoint): each
 * bucket is one flat parameter (unit `bucket-<i>`), and each weight is named by its position:
 * `trainable/<i>` in `model.trainableWeights`, `non-trainable/<j>` in `model.nonTrainableWeights`
 * (saved as replicated buffers). tfjs weight names carry per-process counters (`dense_Dense3`
 * when two models were built), so positions, which the same architecture always gives, are what a
 * load matches; the tfjs names are recorded in the `layers/trainer` document for readers.
 */
export function trainableName(position: number): string {
  return `trainable/${position}`;
}

export function nonTrainableName(position: number): string {
  return `non-trainable/${position}`;
}

/** Where each Parameter the optimizer steps is: its bucket's flat shard and its index there. */
export type ParameterLocations = ReadonlyMap<Parameter, { shard: FlatShard; index: number; name: string }>;

/**
 * The trainer's weights as fsdp's sharded model state. Saving (and loading under the sharded
 * strategies) uses each bucket's own layout and this rank's slice, so each rank writes or reads
 * 1/W of the weights; a 'replicate' load reads every weight on every rank (`whole`: the layout at
 * world size 1), since each rank's optimizer steps whole parameters.
 */
export function describeWeights(
  source: CheckpointSource,
  whole: boolean,
): { state: ShardedModelState; locations: ParameterLocations } {
  const { group } = source;
  const position = new Map<LayerVariable, number>(
    source.model.trainableWeights.map((variable, index) => [variable, index]),
  );
  const parameterOf = new Map<LayerVariable, Parameter>(
    source.model.trainableWeights.map((variable, index) => [variable, source.parameters[index]!]),
  );
  const locations = new Map<Parameter, { shard: FlatShard; index: number; name: string }>();
  const shards = source.buckets.map((bucket, bucketIndex) => {
    const names = bucket.variables.map((variable) => trainableName(position.get(variable)!));
    const renamed = computeFlatParamLayout(
      bucket.layout.parameters.map((parameter, index) => ({
        names: [names[index]!],
        shape: parameter.shape,
      })),
      { dtype: 'float32', worldSize: group.size, alignment: bucket.layout.alignment },
    );
    const layout = whole ? withWorldSize(renamed, 1) : renamed;
    const shard = flatShard({
      unit: `bucket-${bucketIndex}`,
      index: 0,
      layout,
      rank: whole ? 0 : group.rank,
      data: bucket.checkpointData(whole),
      writes: true,
    });
    bucket.variables.forEach((variable, index) => {
      locations.set(parameterOf.get(variable)!, { shard, index, name: names[index]! });
    });
    return shard;
  });
  return {
    state: { shards, shardWorldSize: whole ? 1 : group.size, shardingStrategy: source.strategy },
    locations,
  };
}
