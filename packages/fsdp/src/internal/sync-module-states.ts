import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { Module } from '@fsdp-ts/nn';
import { FsdpError } from '../errors';

/** Broadcasts rank 0's value of every parameter and buffer to every rank (before sharding). */
export function syncModuleStates(group: ProcessGroup, module: Module): void {
  if (group.size === 1) return;
  const deferred = module.parameters().filter((parameter) => parameter.isDeferred);
  if (deferred.length > 0) {
    throw new FsdpError(
      `syncModuleStates broadcasts rank 0's values, but ${deferred.length} parameters have none yet (built inside deferredInit), e.g. ${deferred[0]}.`,
      {
        code: 'invalid-option',
        rank: group.rank,
        expected: 'syncModuleStates with materialised parameters',
        actual: `${deferred.length} deferred parameters`,
        fix: 'drop syncModuleStates: a deferred model makes the same values on every rank from its seed; or call materializeParameters(model) before wrapping.',
      },
    );
  }
  const views = [...module.parameters().map((parameter) => parameter.data), ...module.buffers()];
  for (const view of views) {
    if (view.numel === 0) continue;
    if (view.dtype !== 'float32' && view.dtype !== 'int32') continue; // 16-bit floats: not synced (documented)
    const contiguous = view.contiguous();
    const values = contiguous.typedArray() as Float32Array | Int32Array;
    group.broadcast(values, { root: 0 }).wait();
    if (contiguous !== view) view.copyFrom(contiguous);
  }
}
