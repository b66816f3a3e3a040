import { CheckpointError, type ReplicatedState, readCheckpoint } from '@fsdp-ts/checkpoint';
import * as tf from '@tensorflow/tfjs-core';
import { backingVariable } from '../internal/layer-access';
import { asLayersError } from './checkpoint-errors';
import { optimizerReader } from './checkpoint-optimizer';
import { type CheckpointSource, describeWeights, nonTrainableName } from './checkpoint-state';
import { rejectLegacyCheckpoint } from './legacy-format';
import { TRAINER_DOCUMENT, type TrainerDocument } from './trainer-document';

/** What loading a trainer checkpoint returns. */
export interface LoadedTrainerCheckpoint {
  /** The step directory loaded. */
  path: string;
  step: number;
  /** Optimizer steps taken when it was saved (the trainer's count is set to it). */
  steps: number;
  /** What was passed as `extra` to saveCheckpoint. */
  extra: unknown;
  savedWorldSize: number;
}

/**
 * Loads a checkpoint written by saveShardedCheckpoint (any world size, any strategy), or the
 * newest one under its directory (see [Note: which checkpoint a root resumes from] in
 * @fsdp-ts/fsdp). Under the sharded strategies each rank reads its slice of the weights and of the
 * optimizer state, then the buckets are all-gathered; under 'replicate' each rank reads them
 * whole. Nothing changes unless every rank read and verified everything, and the non-trainable weights
 * were checked for name, shape and dtype (fsdp's readCheckpoint); after that agreement only a file
 * changed between fsdp's verify and copy passes can leave a partial load, which every rank reports.
 */
export function loadShardedCheckpoint(
  directory: string,
  source: CheckpointSource,
  log: (line: string) => void,
): LoadedTrainerCheckpoint {
  rejectLegacyCheckpoint(directory); // see [Note: layers checkpoints of the old format]
  const whole = !source.optimizerOnShard;
  const { state, locations } = describeWeights(source, whole);
  const pieces = new Map(source.parameters.map((parameter, index) => [parameter, source.pieces[index]!]));
  let steps: number | undefined;
  let loaded: ReturnType<typeof readCheckpoint>;
  try {
    loaded = readCheckpoint(directory, {
      group: source.group,
      model: state,
      optimizer: optimizerReader(source.optimizer, locations, pieces),
      log,
      replicated: (replicated) => {
        const apply = stageNonTrainableWeights(source, replicated);
        const trainer = replicated.documents.get(TRAINER_DOCUMENT) as TrainerDocument | undefined;
        return () => {
          apply();
          steps = trainer?.steps;
        };
      },
    });
  } catch (error) {
    throw asLayersError(error, `Loading the checkpoint ${directory}`);
  }
  for (const bucket of source.buckets) bucket.afterCheckpointLoad(whole);
  return {
    path: loaded.path,
    step: loaded.step,
    steps: steps ?? loaded.step,
    extra: loaded.extra,
    savedWorldSize: loaded.savedWorldSize,
  };
}

/**
 * Checks that the checkpoint holds every non-trainable weight with its shape (before the ranks
 * agree) and returns what assigns them (after).
 */
function stageNonTrainableWeights(source: CheckpointSource, replicated: ReplicatedState): () => void {
  const weights = source.model.nonTrainableWeights;
  const problems: string[] = [];
  weights.forEach((weight, index) => {
    const saved = replicated.buffers.get(nonTrainableName(index));
    if (saved === undefined) problems.push(`${nonTrainableName(index)} (${weight.name}) is not in it`);
    else if (!tf.util.arraysEqual([...saved.shape], weight.read().shape))
      problems.push(
        `${nonTrainableName(index)} (${weight.name}) has shape [${saved.shape}] there, [${weight.read().shape}] here`,
      );
    else if (saved.dtype !== weight.read().dtype)
      problems.push(
        `${nonTrainableName(index)} (${weight.name}) is ${saved.dtype} there, ${weight.read().dtype} here`,
      );
  });
  if (problems.length > 0) {
    throw new CheckpointError(
      `The checkpoint's non-trainable weights do not fit the model: ${problems.join('; ')}.`,
      {
        reason: 'model-mismatch',
        expected: weights.map((weight) => `${weight.name} [${weight.read().shape}]`),
        actual: [...replicated.buffers.keys()],
        fix: 'load into the architecture that was saved (the same layers, the same trainable flags).',
      },
    );
  }
  return () => {
    weights.forEach((weight, index) => {
      const saved = replicated.buffers.get(nonTrainableName(index))!;
      tf.tidy(() =>
        backingVariable(weight).assign(
          tf.tensor(saved.values as Float32Array | Int32Array, [...saved.shape], weight.read().dtype),
        ),
      );
    });
  };
}
