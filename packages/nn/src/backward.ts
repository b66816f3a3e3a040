import { kernelBlockOf } from '@fsdp-ts/kernels';
import { type Parameter, readTensorValues, Storage, TensorView } from '@fsdp-ts/tensor';
import { nativeFloatAdd } from '@fsdp-ts/tensor/internal';
import * as tf from '@tensorflow/tfjs-core';
import { type BackwardPlan, backwardHook, hasBackwardHook, trainableParameters } from './backward-hook';
import { NnError } from './errors';
import { discardTapeAfterError } from './internal/discard-tape';
import type { Module } from './module';
import { stepParameterTensor, withParameterTensors } from './parameter-scope';

/**
 * Runs `lossFn` (which calls the module's forward and returns a scalar loss) under tfjs autograd,
 * adds each differentiated Parameter's gradient into its `grad` view (allocated on first use, same
 * dtype and shape as `data`), frees every tensor the step created, and returns the loss.
 *
 * Parameters with `requiresGrad` false get no gradient; a Parameter the loss does not depend on
 * keeps its `grad` unchanged. See [Note: gradient hook] for how a module takes over.
 */
export function backward(module: Module, lossFn: () => tf.Tensor): number {
  let plan: BackwardPlan | null = null;
  try {
    const loss = tf.tidy(() => {
      plan = hasBackwardHook(module) ? module[backwardHook]() : { parameters: trainableParameters(module) };
      return differentiate(plan, lossFn);
    });
    (plan as BackwardPlan | null)?.afterGradients?.();
    return loss;
  } catch (error) {
    const replacement = (plan as BackwardPlan | null)?.onError?.(error);
    throw replacement instanceof Error ? replacement : error;
  }
}

function differentiate(plan: BackwardPlan, lossFn: () => tf.Tensor): number {
  const parameters = [...new Set(plan.parameters)]; // a tied Parameter listed twice is differentiated once
  for (const parameter of parameters) checkFullShape(parameter);
  const tensors = new Map<Parameter, tf.Tensor>();
  for (const parameter of parameters) tensors.set(parameter, stepParameterTensor(parameter));
  const inputs = [...tensors.values(), ...(plan.extraInputs ?? [])];
  const run = () => {
    const loss = withParameterTensors(tensors, lossFn);
    if (loss.size !== 1) {
      throw new NnError(`backward: the loss has shape [${loss.shape.join(', ')}].`, {
        code: 'loss-not-scalar',
        expected: 'a scalar (one element)',
        actual: loss.shape,
        fix: 'reduce the loss to a scalar, e.g. crossEntropy (a mean) or tf.mean(loss).',
      });
    }
    return loss.rank === 0 ? (loss as tf.Scalar) : (tf.reshape(loss, []) as tf.Scalar);
  };
  if (inputs.length === 0) return run().dataSync()[0]!;
  let result: { value: tf.Tensor; grads: tf.Tensor[] };
  try {
    result = tf.engine().gradients(run, inputs, undefined, true);
  } catch (error) {
    discardTapeAfterError();
    throw error;
  }
  const { value, grads } = result;
  parameters.forEach((parameter, index) => {
    const gradient = grads[index];
    if (gradient !== undefined && gradient !== null) accumulate(parameter, gradient);
  });
  return value.dataSync()[0]!;
}

/**
 * grad += gradient; a Parameter without a grad gets a copy of the gradient as its grad.
 *
 * [Note: reading gradients]
 * The gradient is read where it lies (`readTensorValues`: on wasm a view of the heap, used at
 * once), not through `dataSync`, which copies it into a new array every step (13 MB a step for
 * the reference GPT, all of it garbage). A Parameter whose grad is null (after `zeroGrad()`)
 * gets one copy of those values, with no zero fill and no add loop; an existing grad is added
 * to in place, by OpenBLAS's saxpy when a library is loaded (`nativeFloatAdd`: bit-identical
 * to the loop; the loop took 11-13 ms for the reference GPT's 3.2 M gradients at load 12, about
 * 10x the saxpy). The fresh copy is no free lunch either: its memory is new to the process, so
 * each 4 KiB page faults on first write (9.6 ms a step for those 3.2 M against 1.3 ms to copy
 * into a grad that exists); `zeroGrad({ setToNull: false })`, which keeps the grads and zero-fills
 * them (PyTorch 1.13's default), is the cheaper loop.
 */
function accumulate(parameter: Parameter, gradient: tf.Tensor): void {
  let grad = parameter.grad;
  const values = readTensorValues(gradient) as Float32Array;
  if (grad === null && parameter.dtype === 'float32' && values.length === parameter.numel) {
    const copy = gradBesideData(parameter, values) ?? new Float32Array(values);
    parameter.grad = new TensorView(Storage.fromTypedArray('float32', copy), 0, parameter.shape);
    return;
  }
  if (grad === null) {
    grad = TensorView.zeros(parameter.shape, parameter.dtype);
    parameter.grad = grad;
  }
  if (grad.dtype === 'float32' && grad.isContiguous && grad.numel === values.length) {
    const target = grad.typedArray() as Float32Array;
    const add = nativeFloatAdd();
    if (add !== null) add.addInto(target, values);
    else for (let index = 0; index < values.length; index++) target[index]! += values[index]!;
    return;
  }
  if (grad.numel !== values.length) {
    throw new NnError(`backward: ${parameter} has a grad view of shape [${grad.shape.join(', ')}].`, {
      code: 'parameter-not-full-shape',
      expected: `a grad of shape [${parameter.shape.join(', ')}]`,
      actual: grad.shape,
      fix: 'set parameter.grad = null before backward, or let the FSDP wrapper manage sharded grads.',
    });
  }
  const sum = TensorView.zeros(grad.shape, 'float32').copyFrom(grad);
  const target = sum.typedArray() as Float32Array;
  for (let index = 0; index < values.length; index++) target[index]! += values[index]!;
  grad.copyFrom(sum);
}

/**
 * A copy of `values` in the grad slot of the kernel block that holds the Parameter's data, the
 * first time (see [Note: kernel blocks] in @fsdp-ts/kernels: a slot is given once, so a grad set
 * to null later gets ordinary memory); null when its data lives elsewhere.
 */
function gradBesideData(parameter: Parameter, values: Float32Array): Float32Array | null {
  const data = parameter.data;
  if (data.offset !== 0 || !data.storage.isAllocated) return null;
  const block = kernelBlockOf(data.storage.array());
  if (block === null || block.numel !== values.length) return null;
  const slot = block.take('grad');
  slot?.set(values);
  return slot;
}

function checkFullShape(parameter: Parameter): void {
  if (parameter.isFullShape) return;
  throw new NnError(
    `backward: ${parameter} is sharded (data of shape [${parameter.data.shape.join(', ')}]).`,
    {
      code: 'parameter-not-full-shape',
      expected: `data of the original shape [${parameter.shape.join(', ')}]`,
      actual: parameter.data.shape,
      fix: 'call backward on the FSDP wrapper (its gradient hook handles sharded parameters), not on the inner module.',
    },
  );
}
