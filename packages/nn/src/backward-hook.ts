import type { Parameter } from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
import type { Module } from './module';

/**
 * [Note: gradient hook]
 * `backward(module, lossFn)` asks the module for a BackwardPlan before it runs the loss. A module
 * that does not implement `[backwardHook]` gets the default plan: every trainable Parameter
 * (requiresGrad, full shape), differentiated by tfjs and accumulated into `grad`.
 *
 * A module that computes some gradients itself (the FSDP wrapper: each unit's forward is a
 * tfjs customGrad whose gradient function differentiates the unit, writes the flat gradient and
 * starts a reduce-scatter, and returns only the input gradient) implements `[backwardHook]` and
 * returns:
 *   - `parameters`: the Parameters backward should still handle the default way (e.g. ones FSDP
 *     ignores); [] when the module handles them all;
 *   - `extraInputs`: tensors backward also differentiates against and whose gradients it drops.
 *     tfjs only runs a gradient function that lies on a path from a differentiated tensor to
 *     the loss; a unit whose input does not depend on any trainable parameter would be skipped.
 *     Passing a per-step anchor tensor into every unit's customGrad and listing it here makes
 *     every unit's gradient function run;
 *   - `afterGradients()`: called once every gradient is computed and accumulated, before
 *     backward returns (FSDP waits for its reduce-scatters here);
 *   - `onError(error)`: called instead when the loss or the gradient computation threw (FSDP
 *     settles the failure with its peers and reshards here); backward then throws the Error it
 *     returns (FSDP: its 'step-failed' error), or else the error itself.
 * The hook is called inside backward's tf.tidy, so tensors it creates (anchors) are freed
 * after the step.
 */
export const backwardHook: unique symbol = Symbol.for('@fsdp-ts/nn.backwardHook');

/** What a backward hook returns: the parameters, extra inputs and two callbacks (see backwardHook). */
export interface BackwardPlan {
  readonly parameters: readonly Parameter[];
  readonly extraInputs?: readonly tf.Tensor[];
  /** Called once every gradient is computed and accumulated, before backward returns. */
  afterGradients?(): void;
  /** Called when the loss or gradients threw; backward throws the Error it returns, or else the error. */
  onError?(error: unknown): unknown;
}

/** A module that takes part in backward through a backward hook (as FullyShardedDataParallel does). */
export interface BackwardHookModule {
  /** The module's plan for this backward. */
  [backwardHook](): BackwardPlan;
}

/** True when the module has a backward hook. */
export function hasBackwardHook(module: Module): module is Module & BackwardHookModule {
  return typeof (module as Partial<BackwardHookModule>)[backwardHook] === 'function';
}

/** The Parameters the default plan differentiates: trainable ones, each once (ties included). */
export function trainableParameters(module: Module): Parameter[] {
  return module.parameters().filter((parameter) => parameter.requiresGrad);
}
