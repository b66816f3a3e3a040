import { type Parameter, toTf } from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
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
