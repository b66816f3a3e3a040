import type { Parameter, TensorView } from '@fsdp-ts/tensor';
import { OptimError } from '../errors';

/** The float32 elements of a parameter's data and grad, aliasing their storages (no copy). */
export interface ParameterArrays {
  data: Float32Array;
  grad: Float32Array;
}

/**
 * The arrays a kernel updates in place, or null when the parameter is skipped this step (its grad
 * is null, or it does not require grad). Throws for views a fused loop cannot walk.
 */
export function parameterArrays(param: Parameter): ParameterArrays | null {
  const grad = param.grad;
  if (!param.requiresGrad || grad === null) return null;
  const data = param.data;
  if (grad.numel !== data.numel) {
    throw new OptimError(
      `${param}: grad has ${grad.numel} elements but data has ${data.numel}; the optimizer updates data element by element from grad.`,
      {
        code: 'grad-shape-mismatch',
        parameter: String(param),
        expected: data.numel,
        actual: grad.numel,
        fix: 'point grad at the view matching data (the same shard range when sharded), or set it to null to skip the parameter.',
      },
    );
  }
  return { data: float32Array(param, data, 'data'), grad: float32Array(param, grad, 'grad') };
}

function float32Array(param: Parameter, view: TensorView, field: 'data' | 'grad'): Float32Array {
  if (view.dtype !== 'float32') {
    throw new OptimError(`${param}: ${field} is ${view.dtype}; the optimizers update float32 views only.`, {
      code: 'unsupported-dtype',
      parameter: String(param),
      expected: 'float32',
      actual: view.dtype,
      fix: 'keep float32 master parameters and gradients for the optimizer (mixed precision casts copies for compute).',
    });
  }
  if (!view.isContiguous) {
    throw new OptimError(
      `${param}: ${field} is not contiguous (${view}); the update kernels walk flat arrays.`,
      {
        code: 'not-contiguous',
        parameter: String(param),
        expected: 'a contiguous view',
        actual: { shape: view.shape, strides: view.strides },
        fix: `point ${field} at a contiguous view (e.g. view.contiguous(), then copy back).`,
      },
    );
  }
  return view.typedArray() as Float32Array;
}
