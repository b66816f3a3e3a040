import type { OptionKeys } from '@fsdp-ts/errors';
import { FsdpError } from '../errors';
import { checkFsdpOptionKeys } from '../internal/check-option-keys';

/**
 * Where FSDP keeps what does not fit in a rank's memory (see architecture/decisions/2026-12-02-offload.md).
 *
 * - `optimizerState: 'memory'`: the optimizer's state (Adam's moments) lives in a separate host
 *   buffer and is stepped a chunk at a time: DeepSpeed's `offload_optimizer: { device: 'cpu' }`
 *   (FSDP1's `CPUOffload` keeps the optimizer on the host the same way).
 * - `optimizerState: 'disk'`: the same state in files under `directory`, read, verified and
 *   written in chunks around `optimizer.step()`: DeepSpeed's `offload_optimizer: { device: 'nvme' }`.
 * - `parameters: 'disk'`: each unit's parameter shard on disk, read before its all-gather:
 *   ZeRO-Infinity's `offload_param: { device: 'nvme' }` (FSDP1's `CPUOffload(offload_params=True)`
 *   is its host-memory form). Shards are paged in for the optimizer step, state dicts and
 *   checkpoints, and written back when the next forward begins ([Note: offloaded parameters]).
 *   Needs a sharded strategy ('full-shard' or 'shard-grad-op').
 *
 * The optimizer must be attached with `model.offloadOptimizerState(optimizer)`.
 */
export interface OffloadOptions {
  /** Default 'none'. */
  optimizerState?: 'none' | 'memory' | 'disk';
  /** Default 'none'. */
  parameters?: 'none' | 'disk';
  /** Required when anything is 'disk': each rank writes under `directory/rank-<r>/`. */
  directory?: string;
}

/** The keys of OffloadOptions ([Note: option keys] in @fsdp-ts/errors). */
export const offloadOptionKeys = {
  optimizerState: true,
  parameters: true,
  directory: true,
} as const satisfies OptionKeys<OffloadOptions>;

/** OffloadOptions resolved once: what the runtime reads. */
export interface OffloadSettings {
  readonly optimizerState: 'none' | 'memory' | 'disk';
  readonly parameters: 'none' | 'disk';
  /** Set when anything is 'disk'. */
  readonly directory: string | null;
  /** Bytes of optimizer state resident at once (a chunk never splits a parameter's shard). */
  readonly chunkBytes: number;
  /** Bytes written before an fdatasync ([Note: bounded dirty pages] in @fsdp-ts/checkpoint). */
  readonly syncBytes: number;
}

export const noOffload: OffloadSettings = Object.freeze({
  optimizerState: 'none',
  parameters: 'none',
  directory: null,
  chunkBytes: 0,
  syncBytes: 0,
});

const DEFAULT_CHUNK_BYTES = 64 << 20;
const DEFAULT_SYNC_BYTES = 64 << 20;

/** Checks and resolves `offload` (FSDP_OFFLOAD_CHUNK_BYTES sets the chunk size, for tests and tuning). */
export function resolveOffload(offload: OffloadOptions | undefined): OffloadSettings {
  if (offload === undefined) return noOffload;
  if (typeof offload !== 'object' || offload === null) {
    throw new FsdpError(`offload must be an object; got ${String(offload)}.`, {
      code: 'invalid-option',
      expected:
        "{ optimizerState?: 'none' | 'memory' | 'disk', parameters?: 'none' | 'disk', directory?: string }",
      actual: offload,
    });
  }
  checkFsdpOptionKeys('offload', offload, offloadOptionKeys, {
    offload_params:
      "FSDP1's CPUOffload(offload_params=True) is offload: { parameters: 'disk', directory } here",
    offload_optimizer: "DeepSpeed's offload_optimizer is offload: { optimizerState: 'memory' | 'disk' } here",
    offload_param: "ZeRO-Infinity's offload_param is offload: { parameters: 'disk', directory } here",
    nvme_path: "DeepSpeed's nvme_path is offload.directory here",
  });
  const optimizerState = offload.optimizerState ?? 'none';
  if (!['none', 'memory', 'disk'].includes(optimizerState)) {
    throw new FsdpError(
      `offload.optimizerState must be 'none', 'memory' or 'disk'; got ${String(optimizerState)}.`,
      {
        code: 'invalid-option',
        expected: "'none' | 'memory' | 'disk'",
        actual: optimizerState,
      },
    );
  }
  const parameters = offload.parameters ?? 'none';
  if (!['none', 'disk'].includes(parameters)) {
    throw new FsdpError(`offload.parameters must be 'none' or 'disk'; got ${String(parameters)}.`, {
      code: 'invalid-option',
      expected: "'none' | 'disk'",
      actual: parameters,
    });
  }
  const needsDirectory = optimizerState === 'disk' || parameters === 'disk';
  const directory = offload.directory;
  if (needsDirectory && (typeof directory !== 'string' || directory.length === 0)) {
    throw new FsdpError('offload to disk needs offload.directory.', {
      code: 'invalid-option',
      expected: 'offload.directory: a directory on a local disk (each rank writes under rank-<r>/)',
      actual: directory,
      fix: "pass { offload: { optimizerState: 'disk', directory: '/path/on/a/fast/disk' } }.",
    });
  }
  if (directory !== undefined && typeof directory !== 'string') {
    throw new FsdpError('offload.directory must be a string.', {
      code: 'invalid-option',
      expected: 'a path',
      actual: directory,
    });
  }
  return Object.freeze({
    optimizerState,
    parameters,
    directory: needsDirectory ? directory! : null,
    chunkBytes: positiveInteger('FSDP_OFFLOAD_CHUNK_BYTES', DEFAULT_CHUNK_BYTES),
    syncBytes: DEFAULT_SYNC_BYTES,
  });
}

function positiveInteger(variable: string, fallback: number): number {
  const text = process.env[variable];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw new FsdpError(`${variable} must be a positive integer (bytes); got ${text}.`, {
      code: 'invalid-option',
      expected: 'a positive integer',
      actual: text,
      fix: `unset ${variable} or set it to a byte count such as 67108864.`,
    });
  }
  return value;
}
