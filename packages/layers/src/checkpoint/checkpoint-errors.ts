import { CheckpointError } from '@fsdp-ts/checkpoint';
import { LayersError, type LayersErrorCode } from '../errors';

/**
 * @fsdp-ts/checkpoint's CheckpointError as this package's LayersError (its message, file and rank kept, the
 * original as `cause`): damage → 'checkpoint-corrupt', a model or optimizer that does not fit →
 * 'checkpoint-mismatch', anything else (the file system, another rank's failure) →
 * 'checkpoint-failed'. Other errors pass through.
 */
export function asLayersError(error: unknown, what: string): unknown {
  if (!CheckpointError.isInstance(error)) return error;
  const checkpointError = error as CheckpointError;
  const code: LayersErrorCode =
    checkpointError.reason === 'corrupt' ||
    checkpointError.reason === 'truncated' ||
    checkpointError.reason === 'missing'
      ? 'checkpoint-corrupt'
      : checkpointError.reason === 'model-mismatch' || checkpointError.reason === 'optimizer-mismatch'
        ? 'checkpoint-mismatch'
        : 'checkpoint-failed';
  const damaged = code === 'checkpoint-corrupt' && checkpointError.file !== undefined;
  return new LayersError(
    damaged
      ? `Checkpoint file ${checkpointError.file} is damaged: ${checkpointError.message}`
      : `${what} failed: ${checkpointError.message}`,
    {
      code,
      ...(checkpointError.rank === undefined ? {} : { rank: checkpointError.rank }),
      expected: checkpointError.expected,
      actual: checkpointError.actual,
      fix:
        checkpointError.fix ??
        'see the cause; a failed load changes neither the model nor the optimizer, a failed save leaves the previous checkpoint.',
      cause: error,
    },
  );
}
