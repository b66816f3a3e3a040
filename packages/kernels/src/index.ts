/**
 * The kernels the fsdp-ts packages share: one WebAssembly encoder (the SIMD modules of
 * collectives, optim and nn are assembled with it), one OpenBLAS loader (tensor's matMul and
 * collectives' reduce steps), and collectives' reduction and bfloat16 kernels. Internal in
 * purpose: the other packages depend on it; applications use those packages, not this one, and
 * its exports may change in any release.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/kernels
 */

export {
  floatAdd,
  loadNativeFloatAdd,
  type NativeAddLoad,
  type NativeFloatAdd,
  SINGLE_THREAD_ELEMENTS,
  scalesExactly,
} from './blas/blas-reduce';
// The one OpenBLAS loader, and the reduce steps' BLAS arithmetic.
export {
  type BlasLibrary,
  type BlasLoadOptions,
  type BlasLoadResult,
  blasCandidates,
  blasSearchOrder,
  CBLAS_NO_TRANSPOSE,
  CBLAS_ROW_MAJOR,
  CBLAS_TRANSPOSE,
  loadBlas,
  type Saxpy,
  type Scopy,
  type Sgemm,
  type Sscal,
} from './blas/openblas';
// Memories of their own for arrays stepped together in place ([Note: kernel blocks]).
export {
  KERNEL_BLOCK_LIVE_LIMIT,
  KERNEL_BLOCK_MINIMUM_ELEMENTS,
  KERNEL_BLOCK_SCRATCH_ELEMENTS,
  KERNEL_BLOCK_SLOTS,
  KernelBlock,
  type KernelBlockSlot,
  kernelBlock,
  kernelBlockOf,
} from './memory/kernel-block';
export {
  addBfloat16Into,
  addRoundBfloat16,
  bfloat16BitsFromFloat32Bits,
  decodeBfloat16,
  decodeScalar,
  encodeBfloat16,
  encodeRoundBfloat16,
  encodeScalar,
  narrowToBfloat16InPlace,
  numberFromBfloat16Bits,
  roundScalar,
  roundToBfloat16Bits,
  roundToBfloat16InPlace,
  widenBfloat16InPlace,
} from './reduce/bfloat16';
export {
  BFLOAT16_REGIONS,
  type Bfloat16Kernels,
  type Bfloat16Views,
  bfloat16Kernels,
  SIMD_BLOCK,
} from './reduce/bfloat16-simd';
export {
  type InPlaceBfloat16Kernels,
  inPlaceBfloat16Kernels,
} from './reduce/in-place-bfloat16-simd';
export {
  IMPORTED_MEMORY_PAGES,
  type InPlaceKernels,
  inPlaceKernels,
  type SharedWasmMemory,
} from './reduce/in-place-simd';
export {
  type AccumulatorArray,
  finishAverage,
  reduceBlocks,
  reduceInto,
  reducePair,
} from './reduce/reduce-kernels';
export {
  REDUCE_BLOCK,
  REDUCE_REGIONS,
  type ReduceKernels,
  type ReduceViews,
  reduceKernels,
} from './reduce/reduce-simd';
// Collectives' reduction and bfloat16 kernels: scalar loops, SIMD modules over their own memory and over a shared arena, and the placement of their scratch regions.
export type {
  CollectiveBuffer,
  CollectiveDtype,
  ReduceOp,
} from './reduce/reduce-types';
export {
  PLACEMENT_MARGIN,
  PLACEMENT_MINIMUM,
  PLACEMENT_ROOM,
  PLACEMENT_STEP,
  pageDistance,
  placementShift,
} from './reduce/scratch-placement';
export {
  combine,
  placedViews,
  REDUCE_KERNEL_NAMES,
  REDUCTIONS,
  type ReduceKernelName,
  selectKeepingNaN,
  widenBfloat16High,
  widenBfloat16Low,
} from './reduce/simd-fragments';
// The one WebAssembly encoder and its opcodes ([Note: one WebAssembly encoder]).
export {
  constant,
  F32,
  F64,
  FUNCTION_TYPE,
  float32Bytes,
  functionBody,
  get,
  I32,
  increment,
  instantiate,
  load,
  loopWhileBelow,
  MODULE_HEADER,
  memoryImport,
  name,
  section,
  sectionId,
  sharedMemoryImport,
  signedLeb,
  simd,
  store,
  unsignedLeb,
  V128,
  vector,
  vectorOf,
  type WasmMemory,
  type WebAssemblyApi,
  wasmModule,
  webAssembly,
} from './wasm/wasm-encoding';
// Every opcode of the table (BLOCK … F64X2_MUL), by its specification name upper-cased.
export {
  BLOCK,
  BR,
  BR_IF,
  EMPTY_BLOCK,
  END,
  F32_ADD,
  F32_CONST,
  F32_LOAD,
  F32_MUL,
  F32_STORE,
  F32_SUB,
  F32X4_ADD,
  F32X4_DIV,
  F32X4_GE,
  F32X4_LE,
  F32X4_MAX,
  F32X4_MUL,
  F32X4_NE,
  F32X4_SPLAT,
  F32X4_SQRT,
  F32X4_SUB,
  F64X2_ADD,
  F64X2_MUL,
  F64X2_PROMOTE_LOW_F32X4,
  I8X16_SHUFFLE,
  I16X8_ADD_SAT_S,
  I16X8_EQ,
  I16X8_GT_S,
  I16X8_NARROW_I32X4_U,
  I16X8_SUB,
  I32_ADD,
  I32_CONST,
  I32_GE_U,
  I32_SHL,
  I32_SHR_U,
  I32X4_ADD,
  I32X4_EXTEND_HIGH_I16X8_U,
  I32X4_EXTEND_LOW_I16X8_U,
  I32X4_GT_S,
  I32X4_MAX_S,
  I32X4_MIN_S,
  I32X4_SHL,
  I32X4_SHR_U,
  I32X4_SPLAT,
  LOCAL_GET,
  LOCAL_SET,
  LOCAL_TEE,
  LOOP,
  SIMD_PREFIX,
  V128_AND,
  V128_BITSELECT,
  V128_CONST,
  V128_LOAD,
  V128_OR,
  V128_STORE,
  V128_XOR,
} from './wasm/wasm-opcodes';
