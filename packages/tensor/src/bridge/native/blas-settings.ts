import { TensorError } from '../../errors';

/** `FSDP_BLAS=off` keeps the backend's own matMul kernels (no native library is loaded). */
export const BLAS_SWITCH_ENVIRONMENT_VARIABLE = 'FSDP_BLAS';
/** A path or soname of a CBLAS library to load instead of the search order. */
export const BLAS_LIBRARY_ENVIRONMENT_VARIABLE = 'FSDP_BLAS_LIBRARY';
/** BLAS threads per process (default 1: FSDP runs one rank per core). */
export const BLAS_THREADS_ENVIRONMENT_VARIABLE = 'FSDP_BLAS_THREADS';

/** The native-matMul settings of this process, resolved once from the environment. */
export interface BlasSettings {
  enabled: boolean;
  /** An explicit library to load (FSDP_BLAS_LIBRARY), or null for the search order. */
  library: string | null;
  threads: number;
}

export function readBlasSettings(environment: NodeJS.ProcessEnv = process.env): BlasSettings {
  const switchValue = (environment[BLAS_SWITCH_ENVIRONMENT_VARIABLE] ?? '').toLowerCase();
  if (!['', 'on', 'off', '1', '0'].includes(switchValue)) {
    throw new TensorError(`${BLAS_SWITCH_ENVIRONMENT_VARIABLE}=${switchValue} is not a switch.`, {
      code: 'invalid-argument',
      expected: ['on', 'off'],
      actual: switchValue,
      fix: `set ${BLAS_SWITCH_ENVIRONMENT_VARIABLE}=off to keep the backend's own matMul, or unset it.`,
    });
  }
  const threadsValue = environment[BLAS_THREADS_ENVIRONMENT_VARIABLE] ?? '';
  const threads = threadsValue === '' ? 1 : Number(threadsValue);
  if (!Number.isInteger(threads) || threads < 1) {
    throw new TensorError(`${BLAS_THREADS_ENVIRONMENT_VARIABLE}=${threadsValue} is not a thread count.`, {
      code: 'invalid-argument',
      expected: 'a positive integer',
      actual: threadsValue,
      fix: `set ${BLAS_THREADS_ENVIRONMENT_VARIABLE} to the cores each rank may use (default 1), or unset it.`,
    });
  }
  const library = environment[BLAS_LIBRARY_ENVIRONMENT_VARIABLE];
  return {
    enabled: switchValue !== 'off' && switchValue !== '0',
    library: library === undefined || library === '' ? null : library,
    threads,
  };
}
