import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import * as tf from '@tensorflow/tfjs-core';
import type { LayerVariable } from '@tensorflow/tfjs-layers';
import { backingVariable } from './layer-access';

/** Copies rank 0's value of every variable (trainable or not) to every rank. */
export function broadcastWeights(group: ProcessGroup, variables: readonly LayerVariable[]): void {
  if (group.size === 1) return;
  for (const variable of variables) {
    const values = allocateShared(Float32Array, variable.read().size);
    if (group.rank === 0) values.set(variable.read().dataSync() as Float32Array);
    group.broadcast(values, { root: 0 }).wait();
    if (group.rank !== 0) {
      tf.tidy(() => {
        const target = backingVariable(variable);
        target.assign(tf.tensor(values, target.shape, 'float32'));
      });
    }
  }
}
