/**
 * Storage, views, Parameter, and the TensorFlow.js bridge.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/tensor
 */

export {
  blasSearchOrder,
  CBLAS_NO_TRANSPOSE,
  CBLAS_ROW_MAJOR,
  CBLAS_TRANSPOSE,
  type Sgemm,
} from '@fsdp-ts/kernels';
export { type BackendName, backendLadder, isBackendName } from './bridge/backend-name';
export {
  type ComputeInfo,
  computeInfo,
  isNativeMatMulActive,
  nativeSgemm,
  setNativeMatMul,
} from './bridge/compute-info';
export { BACKEND_ENVIRONMENT_VARIABLE, currentBackend, initBackend } from './bridge/init-backend';
export { matMul, registerMatMulGradient } from './bridge/mat-mul';
export {
  BLAS_LIBRARY_ENVIRONMENT_VARIABLE,
  BLAS_SWITCH_ENVIRONMENT_VARIABLE,
  BLAS_THREADS_ENVIRONMENT_VARIABLE,
} from './bridge/native/blas-settings';
export type { MatMulInfo } from './bridge/native/native-mat-mul';
export { nestedGradients } from './bridge/nested-gradients';
export { readTensorValues } from './bridge/read-tensor-values';
export { recompute } from './bridge/recompute';
export { ReleasableTensor, type ReleasableTensorState } from './bridge/releasable-tensor';
export { registerSharedIdentity } from './bridge/shared-identity-kernel';
export { fromTf, toTf } from './bridge/to-tf';
export { registerUnsortedSegmentSum } from './bridge/unsorted-segment-sum-kernel';
export {
  bfloat16ToFloat32,
  bfloat16ToFloat32Scalar,
  float32ToBfloat16,
  float32ToBfloat16Scalar,
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
export {
  formatShape,
  StorageFreedError,
  TensorError,
  type TensorErrorCode,
  type TensorErrorDetails,
} from './errors';
export { loadedTensorCopies } from './package-copies';
export { explainForeignParameter, Parameter, type ParameterOptions } from './parameter';
export type { ParameterInitializer } from './parameter-initializer';
export { contiguousStrides, type Shape, shapeNumel, shapesEqual } from './shape';
export { STORAGE_ALIGNMENT_BYTES, Storage, type StorageOptions } from './storage';
export { StoragePool, storagePool } from './storage-pool';
export { elementOffsets, TensorView } from './tensor-view';
export { zeroFill } from './zero-fill';
