import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { CheckpointError } from '@fsdp-ts/checkpoint';
import { broadcastOutcome, encodeHeader, fsyncDirectory } from '@fsdp-ts/checkpoint/internal';
import type { OptionKeys } from '@fsdp-ts/errors';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import { checkFsdpOptionKeys } from '../internal/check-option-keys';
import { fsdpRuntime } from '../internal/wrapper-runtime';

/** Options of exportSafetensors. */
export interface ExportSafetensorsOptions {
  /** String pairs stored under "__metadata__". Default { format: 'pt' }. */
  metadata?: Record<string, string>;
}

/** The keys of ExportSafetensorsOptions (metadata itself is open: any string pairs). */
const exportSafetensorsOptionKeys = {
  metadata: true,
} as const satisfies OptionKeys<ExportSafetensorsOptions>;

/**
 * Writes the model's full weights to `path` in the safetensors format, float32, under the original
 * names (a tied parameter under each of its names). Collective: units are gathered one at a time
 * (peak memory: one unit's full parameters), rank 0 writes, the file appears atomically.
 */
export function exportSafetensors(
  model: FullyShardedDataParallel,
  path: string,
  options: ExportSafetensorsOptions = {},
): { bytes: number } {
  checkFsdpOptionKeys('exportSafetensors', options, exportSafetensorsOptionKeys);
  const group = model.group;
  const tensors = model[fsdpRuntime].units.flatMap((unit) =>
    unit.handles.flatMap((handle) =>
      handle.layout.parameters.flatMap((parameter) =>
        parameter.names.map((name) => ({ name, shape: parameter.shape })),
      ),
    ),
  );
  const { bytes: header, dataBytes } = encodeHeader(tensors, options.metadata ?? { format: 'pt' });
  const temporary = `${path}.tmp-${process.pid}`;
  let descriptor: number | null = null;
  let localError: unknown;
  const guard = (action: () => void) => {
    if (group.rank !== 0 || localError !== undefined) return;
    try {
      action();
    } catch (error) {
      localError = new CheckpointError(`Writing ${path} failed: ${(error as Error).message}`, {
        reason: 'io',
        file: path,
        cause: error,
        fix: 'check that the directory exists and is writable, with free space.',
      });
    }
  };
  guard(() => {
    descriptor = openSync(temporary, 'w');
    writeAll(descriptor, header);
  });
  for (const unit of model[fsdpRuntime].units) {
    const wasSharded = unit.state === 'sharded';
    if (wasSharded) unit.finishUnshard(group, 'float32');
    try {
      for (const handle of unit.handles) {
        const flat = handle.unshardedBuffer().typedArray() as Float32Array;
        for (const parameter of handle.layout.parameters) {
          const values = flat.subarray(parameter.offset, parameter.offset + parameter.numel);
          const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
          for (const _ of parameter.names) guard(() => writeAll(descriptor!, bytes));
        }
      }
    } finally {
      if (wasSharded) unit.reshard();
    }
  }
  guard(() => {
    fsyncSync(descriptor!);
    closeSync(descriptor!);
    descriptor = null;
    renameSync(temporary, path);
    fsyncDirectory(dirname(path));
  });
  if (group.rank === 0 && localError !== undefined) {
    if (descriptor !== null) closeSync(descriptor);
    rmSync(temporary, { force: true });
  }
  broadcastOutcome(group, 0, localError, `Exporting ${path}`);
  return { bytes: header.byteLength + dataBytes };
}

function writeAll(descriptor: number, bytes: Uint8Array): void {
  let written = 0;
  while (written < bytes.byteLength)
    written += writeSync(descriptor, bytes, written, bytes.byteLength - written);
}
