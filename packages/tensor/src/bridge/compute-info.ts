import type { NativeFloatAdd, Sgemm } from '@fsdp-ts/kernels';
import * as tf from '@tensorflow/tfjs-core';
import type { BackendName } from './backend-name';
import { currentBackend } from './init-backend';
import { type MatMulInfo, nativeMatMul } from './native/native-mat-mul';

export interface ComputeInfo extends MatMulInfo {
  /** The backend picked by initBackend, or null before it ran. */
  backend: BackendName | null;
  /** One line for logs and benchmark tables, e.g. "wasm, matMul: OpenBLAS 0.3.21 (1 thread)". */
  summary: string;
}

/** What computes on this process: the backend and which matMul kernel it runs. */
export function computeInfo(): ComputeInfo {
  const backend = currentBackend();
  const info = nativeMatMul.info(tf.getBackend());
  return { backend, ...info, summary: summarise(backend, info) };
}

/**
 * Turns the BLAS matMul kernels on or off for the active backend and every later `initBackend`
 * (overriding `FSDP_BLAS`). For comparisons and tests; initBackend applies the environment's
 * choice on its own.
 */
export async function setNativeMatMul(enabled: boolean): Promise<ComputeInfo> {
  await nativeMatMul.setEnabled(enabled);
  return computeInfo();
}

/**
 * True when tf.matMul on the active backend runs the BLAS kernel, where transpose flags and batch
 * strides cost nothing (so callers should pass flags rather than materialise transposes).
 */
export function isNativeMatMulActive(): boolean {
  return nativeMatMul.isActive(tf.getBackend());
}

/**
 * OpenBLAS's `cblas_sgemm` while the BLAS matMul kernel is active on the current backend, for
 * kernels that compute on typed arrays themselves (strided heads of attention, say); else null.
 * Arguments follow CBLAS (row-major = 101, no transpose = 111, transpose = 112); typed arrays
 * are passed as pointers to their own memory, so subarrays address offsets without copies.
 */
export function nativeSgemm(): Sgemm | null {
  return nativeMatMul.sgemm(tf.getBackend());
}

/**
 * OpenBLAS's in-place float32 add (`cblas_saxpy` with alpha 1, cut into single-threaded pieces:
 * bit-identical to `target[i] += incoming[i]`) whenever a library is loaded, for kernels that add
 * large typed arrays (nn's gradient accumulation); else null.
 */
export function nativeFloatAdd(): NativeFloatAdd | null {
  return nativeMatMul.floatAdd();
}

function summarise(backend: BackendName | null, info: MatMulInfo): string {
  const name = backend ?? 'no backend';
  if (info.matMul === 'blas') {
    const version = info.blasConfig?.split(' ').slice(0, 2).join(' ') ?? info.blasLibrary;
    const threads =
      info.blasThreads === null ? '' : ` (${info.blasThreads} thread${info.blasThreads === 1 ? '' : 's'})`;
    return `${name}, matMul: ${version}${threads}`;
  }
  return `${name}, matMul: ${name}'s own kernel (${info.reason})`;
}
