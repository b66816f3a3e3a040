import { type CheckpointBuffer, type SavedCheckpoint, writeCheckpoint } from '@fsdp-ts/checkpoint';
import type { OptionKeys } from '@fsdp-ts/errors';
import { asLayersError } from './checkpoint-errors';
import { describeOptimizerState } from './checkpoint-optimizer';
import { type CheckpointSource, describeWeights, nonTrainableName } from './checkpoint-state';
import { MODEL_DOCUMENT, TRAINER_DOCUMENT, type TrainerDocument } from './trainer-document';

/** Arguments of ShardedTrainer's saveCheckpoint. */
export interface SaveCheckpointArgs {
  /** Names the step directory (`step-NNNNNNNN`). Default: the optimizer steps the trainer has taken. */
  step?: number;
  /** Your JSON (the epoch, the data order), returned by loadCheckpoint. */
  extra?: unknown;
  /** Keep only the newest `keep` checkpoints in the directory. Default 1: a save replaces the previous one. */
  keep?: number;
}

/** The keys of SaveCheckpointArgs ([Note: option keys] in @fsdp-ts/errors; `extra` itself is open). */
export const saveCheckpointArgKeys = {
  step: true,
  extra: true,
  keep: true,
} as const satisfies OptionKeys<SaveCheckpointArgs>;

/**
 * [Note: layers checkpoint layout]
 * `trainer.saveCheckpoint(dir)` writes an fsdp checkpoint (@fsdp-ts/checkpoint's writeCheckpoint: the
 * same files, digests, crash-atomic commit and failure agreement as FSDP's) under
 * `dir/step-NNNNNNNN/`, with `dir/latest` naming it:
 * - the trainable weights as flat shards, one flat parameter per bucket, each rank writing its
 *   slice; the optimizer state laid out like them (see [Note: layers checkpoint names]);
 * - the non-trainable weights (batch-norm moving statistics, frozen layers) as replicated
 *   buffers, written once by rank 0 (every rank holds the same values: synchronized batch norm);
 * - the documents `layers/model.json` (the model topology, as tfjs's model.json holds it) and
 *   `layers/trainer` (strategy, world size, steps, the tfjs names of the weights).
 * fsdp's readCheckpoint reads it like any other checkpoint.
 */
export function saveShardedCheckpoint(
  directory: string,
  source: CheckpointSource,
  args: SaveCheckpointArgs = {},
): SavedCheckpoint {
  const { model, group } = source;
  const { state, locations } = describeWeights(source, false);
  const pieces = new Map(source.parameters.map((parameter, index) => [parameter, source.pieces[index]!]));
  const buffers: Record<string, CheckpointBuffer> = {};
  model.nonTrainableWeights.forEach((weight, index) => {
    const value = weight.read();
    // Saved in the weight's own dtype (tfjs variables here are float32 or int32), so loading
    // compares dtypes before the ranks agree instead of failing in assign afterwards.
    buffers[nonTrainableName(index)] =
      value.dtype === 'int32'
        ? { dtype: 'int32', shape: [...value.shape], values: Int32Array.from(value.dataSync() as Int32Array) }
        : {
            dtype: 'float32',
            shape: [...value.shape],
            values: Float32Array.from(value.dataSync() as Float32Array),
          };
  });
  const trainer: TrainerDocument = {
    strategy: source.strategy,
    worldSize: group.size,
    steps: source.steps,
    trainable: model.trainableWeights.map((weight) => ({
      name: weight.name,
      shape: [...weight.read().shape],
    })),
    nonTrainable: model.nonTrainableWeights.map((weight) => ({
      name: weight.name,
      shape: [...weight.read().shape],
    })),
  };
  try {
    return writeCheckpoint(directory, {
      group,
      model: state,
      optimizer: () => describeOptimizerState(source.optimizer, locations, pieces),
      step: args.step ?? source.steps,
      keep: args.keep ?? 1,
      ...(args.extra === undefined ? {} : { extra: args.extra }),
      buffers,
      documents: {
        [MODEL_DOCUMENT]: model.toJSON(null, false) as object,
        [TRAINER_DOCUMENT]: trainer,
      },
    });
  } catch (error) {
    throw asLayersError(error, `Saving the checkpoint under ${directory}`);
  }
}
