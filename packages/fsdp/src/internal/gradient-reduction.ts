import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { FlatParamHandle } from '@fsdp-ts/flat-param';
import { readTensorValues } from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
import type { ShardingStrategy } from '../options';
import type { FsdpUnit, ParameterLocation } from './fsdp-unit';

/**
 * [Note: gradient flow]
 * 1. Autograd hands each trainable Parameter's full gradient to `writeGradient`, which adds it
 *    into the unit's unsharded flat gradient buffer (allocated zeroed on first use in a step).
 * 2. When a unit has all its gradients, `startReduction` issues one reduce-scatter (average) per
 *    handle into the sharded gradient buffer (no-shard: one all-reduce of the flat gradient) and
 *    returns at once: the transfer overlaps the rest of backward.
 * 3. After backward, `finishReduction` waits, adds into gradients the user kept from earlier
 *    steps (accumulation without zeroGrad), frees the unsharded gradient buffers and points every
 *    trainable Parameter's `grad` at its sharded gradient view.
 */
const scratchBuffers = new WeakMap<FlatParamHandle, Float32Array>();
const accumulating = new WeakMap<FlatParamHandle, boolean>();

export function writeGradient(
  location: ParameterLocation,
  gradient: tf.Tensor,
  strategy: ShardingStrategy,
): void {
  const { handle, index, unit } = location;
  if (strategy === 'no-shard' && !unit.receivedGradients) resetKeptGradients(unit);
  handle.unshardedGradBuffer();
  unit.receivedGradients = true;
  const target = handle.unshardedGradView(index)!.typedArray() as Float32Array;
  const values = readTensorValues(gradient);
  for (let element = 0; element < target.length; element++) target[element]! += values[element]!;
}

/** no-shard keeps its flat gradient across steps; start from zero if the user dropped the grads. */
function resetKeptGradients(unit: FsdpUnit): void {
  for (const handle of unit.handles) {
    const wasAllocated = handle.unshardedGradStorage.isAllocated;
    const buffer = handle.unshardedGradBuffer();
    const kept =
      wasAllocated &&
      handle.parameters.every(
        (parameter, index) => !parameter.requiresGrad || parameter.grad === handle.unshardedGradView(index),
      );
    if (!kept) {
      buffer.fill(0);
      handle.parameters.forEach((parameter, index) => {
        if (parameter.requiresGrad) parameter.grad = handle.unshardedGradView(index);
      });
    }
  }
}

export function startReduction(unit: FsdpUnit, group: ProcessGroup, strategy: ShardingStrategy): void {
  if (unit.reductionStarted) return;
  unit.reductionStarted = true;
  if (!unit.receivedGradients) return;
  for (const handle of unit.handles) {
    if (!handle.unshardedGradStorage.isAllocated) continue;
    const input = handle.unshardedGradBuffer().typedArray() as Float32Array;
    if (strategy === 'no-shard') {
      unit.reductionWorks.push(group.allReduce(input, { op: 'avg' }));
      continue;
    }
    const keep = handle.parameters.some(
      (parameter, index) => parameter.requiresGrad && handle.isGradientPresent(index),
    );
    accumulating.set(handle, keep);
    const output = keep ? scratchFor(handle) : (handle.shardedGradBuffer().typedArray() as Float32Array);
    unit.reductionWorks.push(group.reduceScatter(output, input, { op: 'avg' }));
  }
}

export function finishReduction(unit: FsdpUnit, strategy: ShardingStrategy): void {
  const works = unit.reductionWorks;
  unit.reductionWorks = [];
  for (const work of works) work.wait();
  if (strategy !== 'no-shard' && unit.receivedGradients) {
    for (const handle of unit.handles) {
      if (!handle.unshardedGradStorage.isAllocated) continue;
      if (accumulating.get(handle) === true) addScratchIntoShard(handle);
      handle.freeUnshardedGrad();
      handle.setGradientsPresent(true);
    }
  }
  unit.reductionStarted = false;
  unit.receivedGradients = false;
}

function scratchFor(handle: FlatParamHandle): Float32Array {
  let scratch = scratchBuffers.get(handle);
  if (scratch === undefined) {
    scratch = new Float32Array(
      new SharedArrayBuffer(Math.max(4, handle.layout.shardNumel * 4)),
      0,
      handle.layout.shardNumel,
    );
    scratchBuffers.set(handle, scratch);
  }
  return scratch;
}

/** Kept gradients: grad += reduced; dropped ones: grad = reduced (per parameter range). */
function addScratchIntoShard(handle: FlatParamHandle): void {
  const scratch = scratchFor(handle);
  const shard = handle.shardedGradBuffer().typedArray() as Float32Array;
  handle.intersections.forEach((intersection, index) => {
    if (!handle.parameters[index]!.requiresGrad || intersection.length === 0) return;
    const start = intersection.offsetInShard;
    const end = start + intersection.length;
    if (handle.isGradientPresent(index))
      for (let element = start; element < end; element++) shard[element]! += scratch[element]!;
    else shard.set(scratch.subarray(start, end), start);
  });
}
