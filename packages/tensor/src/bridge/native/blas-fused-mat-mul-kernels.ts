import type { BlasLibrary } from '@fsdp-ts/kernels';
import type * as tf from '@tensorflow/tfjs-core';
import {
  type CpuBackendLike,
  type KernelArguments,
  runPlan,
  type WasmBackendLike,
} from './blas-mat-mul-kernels';
import { applyEpilogue, type EpiloguePlan, planEpilogue } from './fused-epilogue';
import { type MatMulPlan, planMatMul } from './mat-mul-plan';

interface FusedInputs {
  a: tf.TensorInfo;
  b: tf.TensorInfo;
  bias?: tf.TensorInfo;
  preluActivationWeights?: tf.TensorInfo;
}

/** The matMul and epilogue plans, or null when the call belongs to tfjs's kernel. */
function planFused(args: KernelArguments): { matMul: MatMulPlan; epilogue: EpiloguePlan } | null {
  const { a, b, bias, preluActivationWeights } = args.inputs as unknown as FusedInputs;
  const operands = [a, b, bias, preluActivationWeights];
  if (operands.some((operand) => operand !== undefined && operand.dtype !== 'float32')) return null;
  const matMul = planMatMul(
    a.shape,
    b.shape,
    args.attrs?.transposeA === true,
    args.attrs?.transposeB === true,
  );
  const epilogue = planEpilogue(
    matMul.outShape,
    bias?.shape ?? null,
    args.attrs?.activation,
    preluActivationWeights?.shape ?? null,
    args.attrs?.leakyreluAlpha,
  );
  return epilogue === null ? null : { matMul, epilogue };
}

/**
 * `_FusedMatMul` (tf.fused.matMul; every tfjs-layers Dense) for wasm, on the heap: sgemm, then
 * bias and activation in place ([Note: fused matMul epilogue]). Views are taken after
 * `makeOutput` for the reason in [Note: heap views after allocation].
 */
export function wasmBlasFusedMatMul(library: BlasLibrary, fallback: tf.KernelFunc): tf.KernelFunc {
  return ((args: KernelArguments) => {
    const plans = planFused(args);
    if (plans === null) return fallback(args as never);
    const { a, b, bias, preluActivationWeights } = args.inputs as unknown as FusedInputs;
    const backend = args.backend as WasmBackendLike;
    const out = backend.makeOutput(plans.matMul.outShape, 'float32');
    const outValues = backend.typedArrayFromHeap(out) as Float32Array;
    runPlan(
      library.sgemm,
      plans.matMul,
      backend.typedArrayFromHeap(a) as Float32Array,
      backend.typedArrayFromHeap(b) as Float32Array,
      outValues,
    );
    applyEpilogue(
      plans.epilogue,
      outValues,
      plans.matMul.n,
      bias === undefined ? null : (backend.typedArrayFromHeap(bias) as Float32Array),
      preluActivationWeights === undefined
        ? null
        : (backend.typedArrayFromHeap(preluActivationWeights) as Float32Array),
    );
    return out;
  }) as unknown as tf.KernelFunc;
}

/** `_FusedMatMul` for cpu on the backend's own typed arrays. */
export function cpuBlasFusedMatMul(library: BlasLibrary, fallback: tf.KernelFunc): tf.KernelFunc {
  return ((args: KernelArguments) => {
    const { a, b, bias, preluActivationWeights } = args.inputs as unknown as FusedInputs;
    const backend = args.backend as CpuBackendLike;
    const valuesOf = (info: tf.TensorInfo | undefined): Float32Array | null | undefined => {
      if (info === undefined) return null;
      const values = backend.data.get(info.dataId).values;
      return values instanceof Float32Array ? values : undefined;
    };
    const aValues = valuesOf(a);
    const bValues = valuesOf(b);
    const biasValues = valuesOf(bias);
    const preluValues = valuesOf(preluActivationWeights);
    const plans =
      aValues && bValues && biasValues !== undefined && preluValues !== undefined ? planFused(args) : null;
    if (plans === null || !aValues || !bValues) return fallback(args as never);
    let size = 1;
    for (const extent of plans.matMul.outShape) size *= extent;
    const out = new Float32Array(size);
    runPlan(library.sgemm, plans.matMul, aValues, bValues, out);
    applyEpilogue(plans.epilogue, out, plans.matMul.n, biasValues ?? null, preluValues ?? null);
    return backend.makeTensorInfo(plans.matMul.outShape, 'float32', out);
  }) as unknown as tf.KernelFunc;
}
