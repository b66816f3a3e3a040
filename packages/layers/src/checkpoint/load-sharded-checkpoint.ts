import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { OptimizerStateDict, ParameterStateEntry } from '@fsdp-ts/optim';
import * as tf from '@tensorflow/tfjs-core';
import { LayersError } from '../errors';
import { backingVariable } from '../internal/layer-access';
import {
  CHECKPOINT_FORMAT,
  type CheckpointIndex,
  checkpointPaths,
  type RankStateIndex,
} from './checkpoint-files';
import type { CheckpointSource } from './save-sharded-checkpoint';

function mismatch(message: string, expected: unknown, actual: unknown, fix: string): LayersError {
  return new LayersError(message, { code: 'checkpoint-mismatch', expected, actual, fix });
}

/** Reads the tfjs-format weights of the checkpoint into the model's variables (by position). */
function loadWeights(directory: string, source: CheckpointSource): void {
  const modelDirectory = checkpointPaths.model(directory);
  const modelJson = JSON.parse(readFileSync(join(modelDirectory, 'model.json'), 'utf8')) as tf.io.ModelJSON;
  const specs = modelJson.weightsManifest.flatMap((group) => group.weights);
  const data = readFileSync(join(modelDirectory, 'weights.bin'));
  const tensors = tf.io.decodeWeights(
    data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength),
    specs,
  );
  const weights = source.model.weights;
  if (specs.length !== weights.length) {
    throw mismatch(
      `The checkpoint holds ${specs.length} weights; the model has ${weights.length}.`,
      weights.length,
      specs.length,
      'load into the same architecture that was saved.',
    );
  }
  weights.forEach((weight, index) => {
    const value = tensors[specs[index]!.name]!;
    if (!tf.util.arraysEqual(value.shape, weight.read().shape)) {
      throw mismatch(
        `Weight ${index} (${weight.name}) has shape [${weight.read().shape}] but the checkpoint's has [${value.shape}].`,
        weight.read().shape,
        value.shape,
        'load into the same architecture that was saved.',
      );
    }
    backingVariable(weight).assign(value);
  });
  tf.dispose(Object.values(tensors));
}

/**
 * Loads a checkpoint saved at any world size and strategy: the weights into the model, and the
 * optimizer state reassembled from every saved rank's pieces, keeping the part this rank's
 * optimizer steps now. Every rank reads every optimizer file (small models; see the README).
 */
export function loadShardedCheckpoint(directory: string, source: CheckpointSource): void {
  const index = JSON.parse(readFileSync(checkpointPaths.index(directory), 'utf8')) as CheckpointIndex;
  if (index.format !== CHECKPOINT_FORMAT) {
    throw mismatch(
      `${checkpointPaths.index(directory)} is not a layers checkpoint.`,
      CHECKPOINT_FORMAT,
      index.format,
      'pass a directory written by trainer.saveCheckpoint.',
    );
  }
  const parameters = source.parameters;
  const sameParameters =
    index.parameters.length === parameters.length &&
    index.parameters.every((saved, position) => saved.numel === parameters[position]!.numel);
  if (!sameParameters) {
    throw mismatch(
      `The checkpoint's ${index.parameters.length} trainable parameters do not match the trainer's ${parameters.length} (count or sizes).`,
      parameters.map((parameter) => parameter.numel),
      index.parameters.map((parameter) => parameter.numel),
      'load into the same architecture that was saved.',
    );
  }
  if (index.optimizer !== source.optimizer.kind) {
    throw mismatch(
      `The checkpoint's optimizer state is ${index.optimizer}; the trainer uses ${source.optimizer.kind}.`,
      source.optimizer.kind,
      index.optimizer,
      `build the trainer with the ${index.optimizer} optimizer.`,
    );
  }
  loadWeights(directory, source);
  const full = new Map<number, { step: number; buffers: Map<string, Float32Array> }>();
  for (let rank = 0; rank < index.worldSize; rank++) {
    const rankIndex = JSON.parse(
      readFileSync(checkpointPaths.rankIndex(directory, rank), 'utf8'),
    ) as RankStateIndex;
    const data = readFileSync(checkpointPaths.rankData(directory, rank));
    for (const entry of rankIndex.entries) {
      const numel = index.parameters[entry.position]!.numel;
      const assembled = full.get(entry.position) ?? {
        step: entry.step,
        buffers: new Map<string, Float32Array>(),
      };
      assembled.step = Math.max(assembled.step, entry.step);
      for (const [name, byteOffset] of Object.entries(entry.buffers)) {
        const buffer = assembled.buffers.get(name) ?? new Float32Array(numel);
        const piece = new Float32Array(
          data.buffer.slice(data.byteOffset + byteOffset, data.byteOffset + byteOffset + entry.numel * 4),
        );
        buffer.set(piece, entry.offsetInParam);
        assembled.buffers.set(name, buffer);
      }
      full.set(entry.position, assembled);
    }
  }
  const state: Record<number, ParameterStateEntry> = {};
  for (const [position, assembled] of full) {
    const parameter = parameters[position]!;
    const piece = source.pieces[position]!;
    const buffers: Record<string, Float32Array> = {};
    for (const [name, buffer] of assembled.buffers)
      buffers[name] = buffer.slice(piece.offsetInParam, piece.offsetInParam + piece.length);
    state[position] = {
      name: parameter.name,
      shape: [...parameter.shape],
      numel: piece.length,
      step: assembled.step,
      buffers,
    };
  }
  const stateDict: OptimizerStateDict = {
    format: 'fsdp-ts/optim-state@1',
    optimizer: index.optimizer,
    state,
    paramGroups: index.paramGroups.map((group) => ({
      ...group,
      paramNames: group.params.map((position) => parameters[position]!.name),
    })),
  };
  source.optimizer.loadStateDict(stateDict);
}
