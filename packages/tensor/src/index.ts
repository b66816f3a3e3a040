/**
 * Storage, views, Parameter, and the TensorFlow.js bridge.
 *
 * What the project's own packages, tests and benchmarks use beyond this (the raw `cblas_sgemm`
 * and its constants) is the `@fsdp-ts/tensor/internal` entry: no compatibility promise, not in
 * this reference (architecture/decisions/2026-12-02-public-surfaces.md).
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/tensor
 */

// Pick the compute backend and see which matMul runs.

export { type BackendName, backendLadder, isBackendName } from './bridge/backend-name';
export { type ComputeInfo, computeInfo, isNativeMatMulActive, setNativeMatMul } from './bridge/compute-info';
export { currentBackend, initBackend } from './bridge/init-backend';
export type { MatMulInfo } from './bridge/native/native-mat-mul';

// Storage and views: allocate, view, free, pool.

export { contiguousStrides, type Shape, shapeNumel, shapesEqual } from './shape';
export { STORAGE_ALIGNMENT_BYTES, Storage, type StorageOptions } from './storage';
export { StoragePool, storagePool } from './storage-pool';
export { elementOffsets, TensorView } from './tensor-view';

// Parameters: the object a user holds, whose data and grad views are re-pointed.

export { explainForeignParameter, Parameter, type ParameterOptions } from './parameter';
export type { ParameterInitializer } from './parameter-initializer';

// Dtypes and conversions between them.

export {
  bfloat16ToFloat32,
  bfloat16ToFloat32Scalar,
  float32ToBfloat16,
  float32ToBfloat16Scalar,
  narrowToBfloat16InPlace,
  widenBfloat16InPlace,
} from './dtype/bfloat16';
export { convertContiguous } from './dtype/convert';
export {
  checkDType,
  type DType,
  dtypes,
  isDType,
  isFloatingPoint,
  itemSize,
  type TypedArray,
  typedArrayFor,
} from './dtype/dtype';
export {
  float16ToFloat32,
  float16ToFloat32Scalar,
  float32ToFloat16,
  float32ToFloat16Scalar,
} from './dtype/float16';

// Compute with tfjs over views: tensors from views and back, matMul, gradients, kernels.

export { matMul, registerMatMulGradient } from './bridge/mat-mul';
export { nestedGradients } from './bridge/nested-gradients';
export { readTensorValues } from './bridge/read-tensor-values';
export { recompute } from './bridge/recompute';
export { ReleasableTensor, type ReleasableTensorState } from './bridge/releasable-tensor';
export { registerSharedIdentity } from './bridge/shared-identity-kernel';
export { fromTf, toTf } from './bridge/to-tf';
export { registerUnsortedSegmentSum } from './bridge/unsorted-segment-sum-kernel';

// Errors.

export {
  formatShape,
  StorageFreedError,
  TensorError,
  type TensorErrorCode,
  type TensorErrorDetails,
} from './errors';
