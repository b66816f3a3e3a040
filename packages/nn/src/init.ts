import { kernelBlock } from '@fsdp-ts/kernels';
import { Parameter, type Shape, Storage, shapeNumel, TensorView } from '@fsdp-ts/tensor';
import { isInitDeferred } from './deferred-init';
import { ConstantInitializer, NormalInitializer } from './initializers';
import { defaultGenerator, type Generator } from './random/generator';

/**
 * [Note: initialisation]
 * GPT-2 style, the same in every process for the same seed:
 *   - Linear and Embedding weights: normal(0, 0.02); Linear biases: 0.
 *   - LayerNorm: weight 1, bias 0.
 *   - Residual output projections (attention and MLP) of a GPT: normal(0, 0.02 / sqrt(2 * nLayers)),
 *     so the residual stream's variance does not grow with depth.
 * Values are drawn in registration order from one Generator (xoshiro128** + Box-Muller), so a
 * model built twice from the same seed is bit-identical.
 * Layers create their parameters through `normalParameter` and `constantParameter`, which inside
 * `deferredInit` record the init instead of running it (see [Note: deferred initialisation]).
 */
export const GPT2_INIT_STD = 0.02;

/** Fills a view with normal(mean, std) values drawn from `generator`, in row-major order. */
export function initNormal(
  view: TensorView,
  std: number,
  generator: Generator = defaultGenerator,
  mean = 0,
): TensorView {
  const values = new Float32Array(view.numel);
  for (let index = 0; index < values.length; index++) values[index] = mean + std * generator.normal();
  writeValues(view, values);
  return view;
}

/** Fills a view with uniform values in [low, high) drawn from `generator`. */
export function initUniform(
  view: TensorView,
  low: number,
  high: number,
  generator: Generator = defaultGenerator,
): TensorView {
  const values = new Float32Array(view.numel);
  for (let index = 0; index < values.length; index++)
    values[index] = low + (high - low) * generator.uniform();
  writeValues(view, values);
  return view;
}

/** Fills `view` with `value` in place and returns it. */
export function initConstant(view: TensorView, value: number): TensorView {
  return view.fill(value);
}

function writeValues(view: TensorView, values: Float32Array): void {
  if (view.dtype === 'float32' && view.isContiguous) {
    view.typedArray().set(values);
    return;
  }
  // Other dtypes or strided views: convert through copyFrom (init is not a hot path).
  view.copyFrom(TensorView.fromArray(values, view.shape, 'float32'));
}

/**
 * A Parameter of `shape` with normal(0, std) values drawn from `generator` (initNormal on a new
 * zero Parameter); inside `deferredInit` a deferred Parameter that records the generator's state
 * and advances the generator past its draws.
 */
export function normalParameter(
  shape: Shape,
  std: number,
  generator: Generator = defaultGenerator,
): Parameter {
  if (isInitDeferred()) {
    const parameter = Parameter.deferred(shape, new NormalInitializer(generator.getState(), std));
    generator.skipNormals(parameter.numel);
    return parameter;
  }
  const parameter = zeroParameter(shape);
  initNormal(parameter.data, std, generator);
  return parameter;
}

/** A Parameter of `shape` with every element `value`; deferred inside `deferredInit`. */
export function constantParameter(shape: Shape, value: number): Parameter {
  if (isInitDeferred()) return Parameter.deferred(shape, new ConstantInitializer(value));
  const parameter = zeroParameter(shape);
  if (value !== 0) parameter.data.fill(value);
  return parameter;
}

/**
 * A float32 Parameter of zeros whose values live in a kernel block when one is made for its size
 * ([Note: kernel blocks] in @fsdp-ts/kernels): its first grad (see [Note: reading gradients]) and
 * Adam's state then go beside it, and AdamW steps them in place ([Note: Adam in a kernel block]
 * in @fsdp-ts/optim). Otherwise, and for small parameters, an ordinary one (Parameter.zeros).
 */
function zeroParameter(shape: Shape): Parameter {
  const block = kernelBlock(shapeNumel(shape));
  if (block === null) return Parameter.zeros(shape);
  return new Parameter(new TensorView(Storage.fromTypedArray('float32', block.array), 0, shape));
}
