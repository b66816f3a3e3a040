import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { OptimizerStateDict, ParameterStateEntry } from '@fsdp-ts/optim';
import * as tf from '@tensorflow/tfjs-core';
import { LayersError } from '../errors';
import { backingVariable } from '../internal/layer-access';
import {
  CHECKPOINT_FORMAT,
  type CheckpointIndex,
  checkpointNames,
  checkpointPaths,
  previousDirectory,
  type RankStateIndex,
} from './checkpoint-files';
import { sha256 } from './durable-files';
import type { CheckpointSource } from './save-sharded-checkpoint';

function corrupt(path: string, detail: string): LayersError {
  return new LayersError(`Checkpoint file ${path} is damaged: ${detail}.`, {
    code: 'checkpoint-corrupt',
    expected: 'the bytes whose SHA-256 checkpoint.json records',
    actual: detail,
    fix: 'load an older checkpoint, or save a new one; the model and optimizer were not changed.',
  });
}

/** A checkpoint file's bytes, checked against the digest checkpoint.json records for it. */
function readVerified(directory: string, index: CheckpointIndex, name: string): Buffer {
  const path = join(directory, name);
  const expected = index.files[name];
  if (expected === undefined) throw corrupt(path, 'checkpoint.json records no digest for it');
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    throw corrupt(path, `it cannot be read (${(error as Error).message})`);
  }
  if (sha256(bytes) !== expected) throw corrupt(path, 'its SHA-256 differs from the recorded one');
  return bytes;
}

/** checkpoint.json, its own digest checked (see [Note: layers checkpoint layout]). */
function readIndex(directory: string): CheckpointIndex {
  const path = checkpointPaths.index(directory);
  let index: CheckpointIndex;
  try {
    index = JSON.parse(readFileSync(path, 'utf8')) as CheckpointIndex;
  } catch (error) {
    throw corrupt(path, `it is not readable JSON (${(error as Error).message})`);
  }
  if (index.format !== CHECKPOINT_FORMAT) {
    throw mismatch(
      `${path} is not a layers checkpoint of this version.`,
      CHECKPOINT_FORMAT,
      index.format,
      'pass a directory written by trainer.saveCheckpoint of this version.',
    );
  }
  if (sha256(JSON.stringify({ ...index, digest: '' })) !== index.digest)
    throw corrupt(path, 'its SHA-256 differs from the one it records');
  return index;
}

/**
 * The directory to load: `directory`, or `<directory>.previous` when a crash between the commit's
 * two renames left only that (see [Note: layers checkpoint commit]).
 */
export function resolveCheckpointDirectory(directory: string, log: (line: string) => void): string {
  if (existsSync(checkpointPaths.index(directory))) return directory;
  const previous = previousDirectory(directory);
  if (existsSync(checkpointPaths.index(previous))) {
    log(`${directory} is missing; loading ${previous} (a save was interrupted while committing).`);
    return previous;
  }
  throw new LayersError(`No checkpoint at ${directory}.`, {
    code: 'checkpoint-mismatch',
    expected: `${checkpointPaths.index(directory)}`,
    actual: 'no such file',
    fix: 'pass a directory written by trainer.saveCheckpoint.',
  });
}

function mismatch(message: string, expected: unknown, actual: unknown, fix: string): LayersError {
  return new LayersError(message, { code: 'checkpoint-mismatch', expected, actual, fix });
}

/** Reads the tfjs-format weights of the checkpoint into the model's variables (by position). */
function loadWeights(modelJsonBytes: Buffer, data: Buffer, source: CheckpointSource): void {
  const modelJson = JSON.parse(modelJsonBytes.toString('utf8')) as tf.io.ModelJSON;
  const specs = modelJson.weightsManifest.flatMap((group) => group.weights);
  const tensors = tf.io.decodeWeights(new Uint8Array(data).buffer, specs);
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
      tf.dispose(Object.values(tensors));
      throw mismatch(
        `Weight ${index} (${weight.name}) has shape [${weight.read().shape}] but the checkpoint's has [${value.shape}].`,
        weight.read().shape,
        value.shape,
        'load into the same architecture that was saved.',
      );
    }
  });
  weights.forEach((weight, index) => {
    backingVariable(weight).assign(tensors[specs[index]!.name]!);
  });
  tf.dispose(Object.values(tensors));
}

/**
 * Loads a checkpoint saved at any world size and strategy: the weights into the model, and the
 * optimizer state reassembled from every saved rank's pieces, keeping the part this rank's
 * optimizer steps now. Every rank reads every optimizer file (small models; see the README).
 */
export function loadShardedCheckpoint(directory: string, source: CheckpointSource): void {
  const index = readIndex(directory);
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
  // Every file is read and checked before the model or the optimizer is touched.
  const modelJson = readVerified(directory, index, checkpointNames.modelJson);
  const modelWeights = readVerified(directory, index, checkpointNames.modelWeights);
  const rankFiles = Array.from({ length: index.worldSize }, (_, rank) => ({
    rankIndex: JSON.parse(
      readVerified(directory, index, checkpointNames.rankIndex(rank)).toString('utf8'),
    ) as RankStateIndex,
    data: readVerified(directory, index, checkpointNames.rankData(rank)),
  }));
  loadWeights(modelJson, modelWeights, source);
  const full = new Map<number, { step: number; buffers: Map<string, Float32Array> }>();
  for (const { rankIndex, data } of rankFiles) {
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
