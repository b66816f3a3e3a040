import type { FullyShardedDataParallel } from './fully-sharded-data-parallel';

/**
 * [Note: gradient accumulation]
 * A backward that starts inside `noSync(fn)` writes its gradients into each unit's unsharded
 * gradient buffer and skips the reduce-scatter (all-reduce under no-shard); the buffers stay
 * allocated after the backward, so the next backward adds into them. The first backward outside
 * `noSync` reduces the sum of every micro-batch's gradient, and from then on `grad` is the usual
 * sharded view. Memory: under the sharding strategies every unit keeps a full-size (unsharded)
 * float32 gradient buffer between the no-sync backwards: the price of skipping communication.
 * Parameters' `grad` between no-sync backwards is not meaningful (do not step the optimizer
 * there). Scale each micro-batch's loss by 1 / (number of micro-batches) to get the gradient of
 * the mean over all micro-batches. Nesting is allowed; an async `fn` keeps the mode until it
 * settles. A failed backward drops the accumulated gradients.
 */
export function runWithoutSync<T>(model: FullyShardedDataParallel, fn: () => T): T {
  return model.noSync(fn);
}
