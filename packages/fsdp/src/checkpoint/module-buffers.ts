import { type CheckpointBuffer, CheckpointError, type ReplicatedState } from '@fsdp-ts/checkpoint';
import { Storage, TensorView } from '@fsdp-ts/tensor';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';

/**
 * The model's buffers (Module.registerBuffer, by dotted name) as checkpoint buffers: contiguous
 * copies, saved once by rank 0 (see [Note: replicated state]). @fsdp-ts/nn's own layers register
 * none; a user's module may (running statistics, step counters).
 */
export function moduleBuffers(model: FullyShardedDataParallel): Record<string, CheckpointBuffer> {
  const buffers: Record<string, CheckpointBuffer> = {};
  for (const [name, view] of model.namedBuffers()) {
    const copy = TensorView.zeros(view.shape, view.dtype).copyFrom(view);
    buffers[name] = { dtype: view.dtype, shape: [...view.shape], values: copy.typedArray() };
  }
  return buffers;
}

/**
 * readCheckpoint's `replicated` hook for the model's buffers: checks that the checkpoint holds every
 * buffer with its shape (before the ranks agree) and copies them in afterwards (converting dtypes).
 * A checkpoint of format version 1 or 2 has no buffers: the model's are left as they are.
 */
export function stageModuleBuffers(model: FullyShardedDataParallel): (state: ReplicatedState) => () => void {
  return (state) => {
    const targets = model.namedBuffers();
    if (!state.saved) return () => {};
    const problems: string[] = [];
    for (const [name, view] of targets) {
      const saved = state.buffers.get(name);
      if (saved === undefined) problems.push(`buffer ${name} is not in the checkpoint`);
      else if (saved.shape.join(',') !== view.shape.join(','))
        problems.push(
          `buffer ${name} has shape [${saved.shape}] in the checkpoint, [${view.shape}] in the model`,
        );
    }
    if (problems.length > 0) {
      throw new CheckpointError(`The checkpoint's buffers do not fit the model: ${problems.join('; ')}.`, {
        reason: 'model-mismatch',
        parameters: targets
          .map(([name]) => name)
          .filter((name) => problems.some((line) => line.includes(name))),
        expected: targets.map(([name, view]) => `${name} [${view.shape}]`),
        actual: [...state.buffers].map(([name, buffer]) => `${name} [${buffer.shape}]`),
        fix: 'build the model with the configuration the checkpoint was saved with.',
      });
    }
    return () => {
      for (const [name, view] of targets) {
        const saved = state.buffers.get(name)!;
        view.copyFrom(new TensorView(Storage.fromTypedArray(saved.dtype, saved.values), 0, saved.shape));
      }
    };
  };
}
