/**
 * The `@fsdp-ts/tensor/internal` entry: what the project's own packages, tests and benchmarks
 * use and a user does not call. No compatibility promise between versions, and not in the API
 * reference (architecture/decisions/2026-12-02-public-surfaces.md).
 *
 * @module
 */

export {
  CBLAS_NO_TRANSPOSE,
  CBLAS_ROW_MAJOR,
  CBLAS_TRANSPOSE,
  type NativeFloatAdd,
  type Sgemm,
} from '@fsdp-ts/kernels';
// The raw `cblas_sgemm` for kernels that compute on typed arrays (nn's Linear and attention), with
// its layout and transpose constants.
export { nativeFloatAdd, nativeSgemm } from '../bridge/compute-info';
