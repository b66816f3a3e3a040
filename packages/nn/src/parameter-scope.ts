import { type Parameter, toTf } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { NnError } from './errors';

/**
 * [Note: parameter tensor scope]
 * Layers never read `parameter.data` themselves: they ask `parameterTensor(parameter)`. Whoever
 * drives the computation decides which tf.Tensor stands for each Parameter:
 *   - `backward` creates one tensor per trainable Parameter per step and differentiates against
 *     exactly those tensors (`withParameterTensors(map, lossFn)`);
 *   - FSDP's unit gradient function re-runs a unit's forward under its own map (tensors over the
 *     unsharded flat buffer) inside tf.grads;
 *   - outside any scope (inference), a tensor is made from `parameter.data` with `toTf`; it
 *     belongs to the caller's tf.tidy.
 * Scopes nest: a lookup walks from the innermost scope outwards, then falls back to `data`.
 */
const scopes: ReadonlyMap<Parameter, tf.Tensor>[] = [];

/** Runs `fn` with `tensors` standing for their Parameters in every `parameterTensor` lookup. */
export function withParameterTensors<T>(tensors: ReadonlyMap<Parameter, tf.Tensor>, fn: () => T): T {
  scopes.push(tensors);
  try {
    return fn();
  } finally {
    scopes.pop();
  }
}

/** The tf.Tensor that stands for `parameter` in the current computation (see the note above). */
export function parameterTensor(parameter: Parameter): tf.Tensor {
  for (let index = scopes.length - 1; index >= 0; index--) {
    const tensor = scopes[index]!.get(parameter);
    if (tensor !== undefined) return tensor;
  }
  if (parameter.isDeferred) {
    throw new NnError(`${parameter} has no values yet: it was built inside deferredInit.`, {
      code: 'parameter-deferred',
      expected: 'a Parameter with values',
      actual: 'a deferred Parameter',
      fix: 'wrap the model in FullyShardedDataParallel (it makes each rank its part), or call materializeParameters(model) first.',
    });
  }
  if (!parameter.isFullShape) {
    throw new NnError(`${parameter} is sharded (its data has shape [${parameter.data.shape.join(', ')}]).`, {
      code: 'parameter-not-full-shape',
      expected: `data of the original shape [${parameter.shape.join(', ')}]`,
      actual: parameter.data.shape,
      fix: 'run the forward through the FSDP wrapper (it gathers the parameters first), or inside summonFullParams.',
    });
  }
  return toTf(parameter.data);
}

interface HeapBackend {
  typedArrayFromHeap?: (info: tf.TensorInfo) => Float32Array | Int32Array;
}

interface StepTensor {
  tensor: tf.Tensor;
  backend: tf.KernelBackend;
}

const stepTensors = new WeakMap<Parameter, StepTensor>();
const releaseStepTensor = new FinalizationRegistry<tf.Tensor>((tensor) => {
  if (!tensor.isDisposed) tensor.dispose();
});

/**
 * The tensor `backward` differentiates against for `parameter` this step, holding `parameter.data`'s
 * values now.
 *
 * [Note: step tensors]
 * On wasm every toTf allocates heap memory, copies the values in and registers a tensor, and the
 * step's tidy frees it again: 52 tensors, 13 MB, each step of the reference GPT. Here each
 * Parameter keeps one tensor on the wasm heap (kept out of every tidy) and each call copies
 * `data`'s values into it. It is refreshed on every call, never trusted from an earlier one, so
 * it cannot be stale: nothing needs to know who wrote the data since (optimizers, loadStateDict,
 * FSDP re-pointing data, a user writing typedArray()). A version counter that let an unchanged
 * Parameter skip the copy was not kept: a training step always writes every parameter, and the
 * writers that touch storages through raw typed arrays (collectives, checkpoint readers) could
 * not all be made to bump it. Between steps nothing but this map refers to the tensor (the step's
 * tidy disposed every alias), so writing into it is safe. Another backend, a non-float32 dtype
 * or a backend without heap access gets a fresh toTf tensor as before. `releaseStepTensors`
 * frees the kept tensors (a Parameter that is garbage collected frees its own).
 */
export function stepParameterTensor(parameter: Parameter): tf.Tensor {
  const backend = tf.backend();
  const heap = backend as unknown as HeapBackend;
  if (
    tf.getBackend() !== 'wasm' ||
    parameter.dtype !== 'float32' ||
    typeof heap.typedArrayFromHeap !== 'function'
  ) {
    return toTf(parameter.data);
  }
  let entry = stepTensors.get(parameter);
  if (entry !== undefined && (entry.backend !== backend || entry.tensor.isDisposed)) {
    releaseStepTensors([parameter]);
    entry = undefined;
  }
  if (entry === undefined) {
    const tensor = tf.keep(toTf(parameter.data));
    entry = { tensor, backend };
    stepTensors.set(parameter, entry);
    releaseStepTensor.register(parameter, tensor, entry);
    return tensor;
  }
  heap.typedArrayFromHeap(entry.tensor).set(parameter.data.contiguous().typedArray() as Float32Array);
  return entry.tensor;
}

/** Frees the step tensors kept for `parameters` (see [Note: step tensors]); the next backward makes new ones. */
export function releaseStepTensors(parameters: Iterable<Parameter>): void {
  for (const parameter of parameters) {
    const entry = stepTensors.get(parameter);
    if (entry === undefined) continue;
    stepTensors.delete(parameter);
    releaseStepTensor.unregister(entry);
    if (!entry.tensor.isDisposed) {
      try {
        entry.tensor.dispose();
      } catch {
        // Its backend was removed (tf.removeBackend): its memory went with it.
      }
    }
  }
}
