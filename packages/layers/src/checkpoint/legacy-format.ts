import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LayersError } from '../errors';

/** The `format` of checkpoint.json in @fsdp-ts/layers' own checkpoints, before fsdp's format. */
const LEGACY_FORMAT_PREFIX = 'fsdp-ts/layers-checkpoint@';

/**
 * [Note: layers checkpoints of the old format]
 * Before @fsdp-ts/layers wrote the checkpoint format of @fsdp-ts/checkpoint (version 3), it had its own: a
 * directory with `checkpoint.json` (`format: 'fsdp-ts/layers-checkpoint@1'` or `@2`), the whole
 * model in tfjs's format under `model/` and per-rank optimizer pieces (`optimizer-rank-<r>.json`
 * and `.bin`); a crash between its commit's two renames left `<dir>.previous`. fsdp's reader finds
 * no `latest` or `step-*` there and reports the checkpoint missing, which sends the user looking
 * for a file that is not the problem. So a load first looks for that layout (every rank sees the
 * same shared directory, so every rank throws the same error before any collective).
 */
export function rejectLegacyCheckpoint(directory: string): void {
  const found = legacyIndex(directory) ?? legacyIndex(`${directory}.previous`);
  if (found === null) return;
  const model = join(found.directory, 'model', 'model.json');
  throw new LayersError(
    `${found.directory} is a checkpoint in the old @fsdp-ts/layers format (${found.format}); this version of @fsdp-ts/layers reads checkpoints in @fsdp-ts/fsdp's checkpoint format (version 3: step-NNNNNNNN/ directories with metadata.json, and latest).`,
    {
      code: 'checkpoint-format',
      expected: "@fsdp-ts/fsdp's checkpoint format, version 3",
      actual: found.format,
      fix: `resume with the @fsdp-ts/layers release that wrote it, or convert it: its weights are a tfjs model in ${model} (with weights.bin beside it): load them with tf.loadLayersModel (file:// needs @tensorflow/tfjs-node; otherwise read both files and pass tf.io.fromMemory), copy them into your model with model.setWeights(loaded.getWeights()), then call trainer.saveCheckpoint(dir) to write the new format. The old optimizer state is not carried over, so the optimizer starts afresh.`,
    },
  );
}

/** The old layout's format in `directory`, or null when it is not there. */
function legacyIndex(directory: string): { directory: string; format: string } | null {
  const index = join(directory, 'checkpoint.json');
  if (!existsSync(index) || existsSync(join(directory, 'metadata.json'))) return null;
  let format: unknown;
  try {
    format = (JSON.parse(readFileSync(index, 'utf8')) as { format?: unknown }).format;
  } catch {
    format = undefined;
  }
  if (typeof format === 'string' && format.startsWith(LEGACY_FORMAT_PREFIX)) return { directory, format };
  // An index that is not JSON (damaged) beside the old layout's files: still the old format.
  if (
    existsSync(join(directory, 'model', 'model.json')) &&
    existsSync(join(directory, 'optimizer-rank-0.json'))
  )
    return { directory, format: `${LEGACY_FORMAT_PREFIX}? (checkpoint.json unreadable)` };
  return null;
}
