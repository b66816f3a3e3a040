import {
  type BlasLibrary,
  CBLAS_NO_TRANSPOSE,
  CBLAS_ROW_MAJOR,
  CBLAS_TRANSPOSE,
  type Sgemm,
} from '@fsdp-ts/kernels';
import type * as tf from '@tensorflow/tfjs-core';
import { type MatMulPlan, planMatMul } from './mat-mul-plan';

/** The parts of tfjs-backend-wasm's BackendWasm this kernel uses. */
export interface WasmBackendLike {
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  typedArrayFromHeap(info: tf.TensorInfo): tf.TypedArray;
}

/** The parts of tfjs-backend-cpu's MathBackendCPU this kernel uses. */
export interface CpuBackendLike {
  data: { get(dataId: unknown): { values?: unknown } };
  makeTensorInfo(shape: number[], dtype: tf.DataType, values: tf.TypedArray): tf.TensorInfo;
}

export interface KernelArguments {
  inputs: tf.NamedTensorInfoMap;
  backend: unknown;
  attrs?: tf.NamedAttrMap;
}

/** Runs a plan: one sgemm per call, pointers offset into the operands (see [Note: matMul as BLAS calls]). */
export function runPlan(
  sgemm: Sgemm,
  plan: MatMulPlan,
  a: Float32Array,
  b: Float32Array,
  out: Float32Array,
): void {
  if (plan.calls.length === 0) return;
  if (plan.k === 0) {
    out.fill(0); // an empty sum; BLAS would be asked to read no memory at all
    return;
  }
  const transposeA = plan.transposeA ? CBLAS_TRANSPOSE : CBLAS_NO_TRANSPOSE;
  const transposeB = plan.transposeB ? CBLAS_TRANSPOSE : CBLAS_NO_TRANSPOSE;
  for (const call of plan.calls) {
    sgemm(
      CBLAS_ROW_MAJOR,
      transposeA,
      transposeB,
      call.rows,
      plan.n,
      plan.k,
      1,
      call.aOffset === 0 ? a : a.subarray(call.aOffset),
      plan.lda,
      call.bOffset === 0 ? b : b.subarray(call.bOffset),
      plan.ldb,
      0,
      call.outOffset === 0 ? out : out.subarray(call.outOffset),
      plan.ldc,
    );
  }
}

/**
 * BatchMatMul for wasm on the wasm heap itself. [Note: heap views after allocation]
 * `makeOutput` may grow the wasm memory, which detaches every view taken before it, so the views
 * of a, b and out are taken after it and used at once (sgemm does not allocate on the wasm heap).
 */
export function wasmBlasMatMul(library: BlasLibrary, fallback: tf.KernelFunc): tf.KernelFunc {
  return ((args: KernelArguments) => {
    const { a, b } = args.inputs as { a: tf.TensorInfo; b: tf.TensorInfo };
    if (a.dtype !== 'float32' || b.dtype !== 'float32') return fallback(args as never);
    const backend = args.backend as WasmBackendLike;
    const plan = planMatMul(
      a.shape,
      b.shape,
      args.attrs?.transposeA === true,
      args.attrs?.transposeB === true,
    );
    const out = backend.makeOutput(plan.outShape, 'float32');
    runPlan(
      library.sgemm,
      plan,
      backend.typedArrayFromHeap(a) as Float32Array,
      backend.typedArrayFromHeap(b) as Float32Array,
      backend.typedArrayFromHeap(out) as Float32Array,
    );
    return out;
  }) as unknown as tf.KernelFunc;
}

/** BatchMatMul for cpu on the backend's own typed arrays (sliced tensors are subarrays: fine). */
export function cpuBlasMatMul(library: BlasLibrary, fallback: tf.KernelFunc): tf.KernelFunc {
  return ((args: KernelArguments) => {
    const { a, b } = args.inputs as { a: tf.TensorInfo; b: tf.TensorInfo };
    const backend = args.backend as CpuBackendLike;
    const aValues = backend.data.get(a.dataId).values;
    const bValues = backend.data.get(b.dataId).values;
    if (!(aValues instanceof Float32Array) || !(bValues instanceof Float32Array))
      return fallback(args as never);
    const plan = planMatMul(
      a.shape,
      b.shape,
      args.attrs?.transposeA === true,
      args.attrs?.transposeB === true,
    );
    let size = 1;
    for (const extent of plan.outShape) size *= extent;
    const out = new Float32Array(size);
    runPlan(library.sgemm, plan, aValues, bValues, out);
    return backend.makeTensorInfo(plan.outShape, 'float32', out);
  }) as unknown as tf.KernelFunc;
}
