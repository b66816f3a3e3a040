import { closeSync, openSync, readSync } from 'node:fs';
import { CheckpointError, type FlatShard } from '@fsdp-ts/checkpoint';
import {
  readHeader,
  type SafetensorsHeader,
  safetensorsItemSize,
  throwIfAnyRankFailed,
} from '@fsdp-ts/checkpoint/internal';
import { bfloat16ToFloat32, float16ToFloat32, formatShape, shapesEqual } from '@fsdp-ts/tensor';
import { checkpointShards } from '../checkpoint/model-shards';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';

/**
 * Loads full weights from a safetensors file (F32, F16 or BF16) into the model's shards by name.
 * Collective: each rank reads only the byte ranges of its own shards; nothing changes unless every
 * rank succeeded. Every model parameter must be in the file (any of a tied parameter's names),
 * with its shape; tensors the model lacks are an error too.
 */
export function importSafetensors(model: FullyShardedDataParallel, path: string): void {
  const staged = new Map<FlatShard, Float32Array>();
  let localError: unknown;
  try {
    const header = readHeader(path);
    const handles = checkpointShards(model).shards;
    checkNames(path, header, handles);
    const descriptor = openSync(path, 'r');
    try {
      for (const entry of handles) staged.set(entry, readHandle(descriptor, header, entry));
    } finally {
      closeSync(descriptor);
    }
  } catch (error) {
    localError = error;
  }
  throwIfAnyRankFailed(model.group, localError, `Importing ${path}`);
  for (const [entry, values] of staged) entry.data.set(values);
}

function checkNames(path: string, header: SafetensorsHeader, handles: readonly FlatShard[]): void {
  const problems: string[] = [];
  const offenders: string[] = [];
  const used = new Set<string>();
  for (const entry of handles) {
    for (const parameter of entry.layout.parameters) {
      for (const name of parameter.names) used.add(name);
      const name = parameter.names.find((candidate) => header.tensors.has(candidate));
      const tensor = name === undefined ? undefined : header.tensors.get(name);
      if (tensor === undefined) problems.push(`${parameter.names[0]} is missing`);
      else if (!shapesEqual(tensor.shape, parameter.shape)) {
        problems.push(
          `${name} is ${formatShape(tensor.shape)} in the file, ${formatShape(parameter.shape)} in the model`,
        );
      } else continue;
      offenders.push(parameter.names[0]!);
    }
  }
  for (const name of header.tensors.keys()) {
    if (!used.has(name)) {
      problems.push(`${name} is not in the model`);
      offenders.push(name);
    }
  }
  if (problems.length > 0) {
    throw new CheckpointError(`${path} does not fit the model: ${problems.join('; ')}.`, {
      reason: 'model-mismatch',
      file: path,
      parameters: offenders,
      fix: 'build the model with the configuration the weights were exported from.',
    });
  }
}

function readHandle(descriptor: number, header: SafetensorsHeader, entry: FlatShard): Float32Array {
  const target = new Float32Array(entry.data.length);
  entry.layout.parameters.forEach((parameter, index) => {
    const { offsetInShard, offsetInParam, length } = entry.intersections[index]!;
    if (length === 0) return;
    const tensor = header.tensors.get(parameter.names.find((name) => header.tensors.has(name))!)!;
    const itemSize = safetensorsItemSize[tensor.dtype];
    const bytes = Buffer.allocUnsafe(length * itemSize);
    const position = header.dataStart + tensor.data_offsets[0] + offsetInParam * itemSize;
    let filled = 0;
    while (filled < bytes.byteLength) {
      const count = readSync(descriptor, bytes, filled, bytes.byteLength - filled, position + filled);
      if (count === 0) break;
      filled += count;
    }
    const aligned = new Uint8Array(bytes.byteLength);
    aligned.set(bytes);
    const destination = target.subarray(offsetInShard, offsetInShard + length);
    if (tensor.dtype === 'F32') destination.set(new Float32Array(aligned.buffer));
    else if (tensor.dtype === 'F16') float16ToFloat32(new Uint16Array(aligned.buffer), destination);
    else bfloat16ToFloat32(new Uint16Array(aligned.buffer), destination);
  });
  return target;
}
