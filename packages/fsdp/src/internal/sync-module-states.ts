import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { Module } from '@fsdp-ts/nn';

/** Broadcasts rank 0's value of every parameter and buffer to every rank (before sharding). */
export function syncModuleStates(group: ProcessGroup, module: Module): void {
  if (group.size === 1) return;
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
