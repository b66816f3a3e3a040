import type { ProcessGroup, Work } from '@fsdp-ts/collectives';
import type { FlatParamHandle } from '@fsdp-ts/flat-param';
import { bfloat16ToFloat32, float32ToBfloat16, readTensorValues } from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
import type { CommunicationDtype } from '../mixed-precision';
import type { ShardingSettings } from '../sharding-strategy';
import type { FsdpUnit, ParameterLocation } from './fsdp-unit';
import { sharedUint16 } from './shared-arrays';

/** How a unit's gradients are reduced (from the options). */
export interface ReductionSettings {
  readonly group: ProcessGroup;
  readonly sharding: ShardingSettings;
  /** 'bfloat16': reduce in bfloat16 (see [Note: mixed precision]). */
  readonly reduceDtype: CommunicationDtype;
}

/**
 * [Note: gradient flow]
 * 1. Autograd hands each trainable Parameter's full gradient to `writeGradient`, which adds it
 *    into the unit's unsharded flat gradient buffer (allocated zeroed on first use in a step).
 * 2. When a unit has all its gradients, `startReduction` issues one reduce-scatter (average) per
 *    handle into the sharded gradient buffer (no-shard: one all-reduce of the flat gradient) and
 *    returns at once: the transfer overlaps the rest of backward.
 *    With reduceDtype 'bfloat16' the input is rounded into a bfloat16 copy and the output widened
 *    after the wait; with a replicate group (hybrid) the output is then all-reduced over it.
 * 3. After backward, `finishReduction` waits, adds into gradients the user kept from earlier
 *    steps (accumulation without zeroGrad), frees the unsharded gradient buffers and points every
 *    trainable Parameter's `grad` at its sharded gradient view.
 */
const scratchBuffers = new WeakMap<FlatParamHandle, Float32Array>();
const accumulating = new WeakMap<FlatParamHandle, boolean>();
/** bfloat16 reductions in flight: the bfloat16 output and the float32 array it widens into. */
const pendingWidening = new WeakMap<FlatParamHandle, { output: Uint16Array; target: Float32Array }>();
/** The reduced float32 output of the last reduction of each handle (for the replica all-reduce). */
const reducedOutputs = new WeakMap<FlatParamHandle, Float32Array>();

export function writeGradient(
  location: ParameterLocation,
  gradient: tf.Tensor,
  sharding: ShardingSettings,
): void {
  const { handle, index, unit } = location;
  if (!sharding.shardParameters && !unit.receivedGradients) resetKeptGradients(unit);
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

export function startReduction(unit: FsdpUnit, settings: ReductionSettings): void {
  if (unit.reductionStarted) return;
  unit.reductionStarted = true;
  if (!unit.receivedGradients) return;
  for (const handle of unit.handles) {
    if (!handle.unshardedGradStorage.isAllocated) continue;
    const input = handle.unshardedGradBuffer().typedArray() as Float32Array;
    if (settings.sharding.gradientReduction === 'all-reduce') {
      unit.reductionWorks.push(reduce(handle, settings, input, input, 'allReduce'));
      continue;
    }
    const keep = handle.parameters.some(
      (parameter, index) => parameter.requiresGrad && handle.isGradientPresent(index),
    );
    accumulating.set(handle, keep);
    const output = keep ? scratchFor(handle) : (handle.shardedGradBuffer().typedArray() as Float32Array);
    unit.reductionWorks.push(reduce(handle, settings, output, input, 'reduceScatter'));
  }
}

/** Issues one reduction (average) of `input` into `output`, in the settings' reduce dtype. */
function reduce(
  handle: FlatParamHandle,
  settings: ReductionSettings,
  output: Float32Array,
  input: Float32Array,
  kind: 'allReduce' | 'reduceScatter',
): Work {
  reducedOutputs.set(handle, output);
  const { group } = settings;
  if (settings.reduceDtype === 'float32') {
    return kind === 'allReduce'
      ? group.allReduce(input, { op: 'avg' })
      : group.reduceScatter(output, input, { op: 'avg' });
  }
  const input16 = float32ToBfloat16(input, sharedUint16(input.length));
  const options = { op: 'avg', dtype: 'bfloat16' } as const;
  if (kind === 'allReduce') {
    pendingWidening.set(handle, { output: input16, target: output });
    return group.allReduce(input16, options);
  }
  const output16 = sharedUint16(output.length);
  pendingWidening.set(handle, { output: output16, target: output });
  return group.reduceScatter(output16, input16, options);
}

export function finishReduction(unit: FsdpUnit, settings: ReductionSettings): void {
  const works = unit.reductionWorks;
  unit.reductionWorks = [];
  for (const work of works) work.wait();
  for (const handle of unit.handles) {
    const pending = pendingWidening.get(handle);
    if (pending === undefined) continue;
    pendingWidening.delete(handle);
    bfloat16ToFloat32(pending.output, pending.target);
  }
  if (settings.sharding.shardParameters && unit.receivedGradients) {
    const replicateGroup = settings.sharding.replicateGroup;
    if (replicateGroup !== null && replicateGroup.size > 1) {
      const replicaWorks: Work[] = [];
      for (const handle of unit.handles) {
        const output = reducedOutputs.get(handle);
        if (!handle.unshardedGradStorage.isAllocated || output === undefined) continue;
        replicaWorks.push(replicateGroup.allReduce(output, { op: 'avg' }));
      }
      for (const work of replicaWorks) work.wait();
    }
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
