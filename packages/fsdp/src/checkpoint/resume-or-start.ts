import { findLatestCheckpoint } from '@fsdp-ts/checkpoint';
import { checkFsdpOptionKeys } from '../internal/check-option-keys';
import { type LoadCheckpointOptions, loadCheckpoint, loadCheckpointOptionKeys } from './load-checkpoint';

/** Where training goes on: the step after the checkpoint loaded (or 0), and that checkpoint's extras. */
export interface ResumePoint {
  /** The `step` the loaded checkpoint was saved with; 0 when there was none. */
  step: number;
  /** What was passed as `extra` to saveCheckpoint; undefined when starting fresh. */
  extra: unknown;
  /** The step directory loaded, or null when starting fresh. */
  path: string | null;
  /** The world size it was saved at (null when starting fresh); may differ from the current one. */
  savedWorldSize: number | null;
}

/**
 * Loads the latest intact checkpoint under `root` into `model` (and `optimizer`), resharded to the
 * current world size, or leaves them as they are when `root` holds none. Lets a script started by
 * `fsdp-run --nnodes MIN:MAX` resume after every round change without code for the world size:
 *
 *   const { step } = resumeOrStart(dir, { model, optimizer });
 *   for (let s = step; s < total; s++) { ... }
 *
 * Collective like loadCheckpoint: every rank calls it. Errors are loadCheckpoint's
 * (CheckpointError naming the file and the reason).
 */
export function resumeOrStart(root: string, options: LoadCheckpointOptions): ResumePoint {
  checkFsdpOptionKeys('resumeOrStart', options, loadCheckpointOptionKeys);
  const latest = findLatestCheckpoint(root, options.log);
  if (latest === null) return { step: 0, extra: undefined, path: null, savedWorldSize: null };
  const loaded = loadCheckpoint(latest, options);
  return { step: loaded.step, extra: loaded.extra, path: loaded.path, savedWorldSize: loaded.savedWorldSize };
}
