import { type BlasLibrary, blasCandidates, loadBlas } from './openblas';

/**
 * [Note: blas reduce steps]
 * On the native tcp data path, float32 sum and avg reduce steps add the incoming values into the
 * work array in place with OpenBLAS's `cblas_saxpy(n, 1, incoming, 1, work, 1)`, called through
 * koffi from the communication worker's thread: one pass (read two, write one) instead of the
 * SIMD kernel's two V8 copies per block ([Note: simd reduce steps] in collectives' ring-step-simd-reduce.ts).
 * With alpha 1 the multiply is exact, so each element is round(work + incoming), bit-identical
 * to a float32 add (fused or not); the tests compare it with the scalar reduction over awkward
 * values. An average's last step then divides by the group size: when the size is a power of
 * two, `cblas_sscal` by 1/size on the piece just summed (1/2^k is exact, and x * 2^-k and x / 2^k
 * are the same real number rounded once, subnormals included). It replaces the scalar division
 * loop, which took 0.5-1.1 ms per 394 880 floats (the shard of one GPT block at W=2) against
 * 0.09-0.19 ms for a copy of them in the same run (about 3.5 ms of the communication thread's
 * ~18 ms per communication-bound step). Other sizes keep the division.
 *
 * Threads: OpenBLAS's axpy splits a call over its thread pool when n > 10000 (interface/axpy.c;
 * copy has its own, higher threshold), and the pool's size is process-global (the tensor package
 * sets it for matMul). These calls never set it: every call is cut into pieces of at most
 * SINGLE_THREAD_ELEMENTS, so it always runs on the calling thread.
 *
 * The library is the one openblas.ts loads for tensor's matMul too (`FSDP_BLAS_LIBRARY` first,
 * then the search order), so the process maps it once. The tcp engine loads it when it starts, before its peers connect: loading starts OpenBLAS's thread
 * pool, whose idle threads spin a while before they sleep, which would otherwise compete with the
 * group's first ops.
 */
export const SINGLE_THREAD_ELEMENTS = 10_000;

/** In-place float32 arithmetic on the native data path. */
export interface NativeFloatAdd {
  /** What was loaded: the library name or path that succeeded. */
  readonly library: string;
  /** target[i] = target[i] + incoming[i] for i < target.length (incoming at least as long). */
  addInto(target: Float32Array, incoming: Float32Array): void;
  /**
   * target[i] = own[i] + incoming[i] for i < target.length (a reduce-scatter's step, whose own
   * values are in its input): per piece, own is copied into target, then incoming added there
   * while that piece is still in cache (measured cheaper than adding own into incoming and
   * copying the sums out: 2.5–3.5 against 3.1–6.6 ms per 16 MiB, load 4).
   */
  sumInto(target: Float32Array, own: Float32Array, incoming: Float32Array): void;
  /**
   * target[i] = target[i] * factor (cblas_sscal). Used only with factor 1/2^k, where the product
   * is exact: it equals the float32 division by 2^k bit for bit (see [Note: blas reduce steps]).
   */
  scale(target: Float32Array, factor: number): void;
}

/** Whether a float32 average over `size` ranks may be a BLAS scale by 1/size (exact for powers of two). */
export function scalesExactly(size: number): boolean {
  return size >= 1 && (size & (size - 1)) === 0;
}

export type NativeAddLoad = { add: NativeFloatAdd } | { add: undefined; reason: string };

/**
 * Loads OpenBLAS (blasCandidates(), with koffi at `koffiPath`, resolved by the thread that
 * starts the caller's) for the reduce steps; never throws.
 */
export function loadNativeFloatAdd(koffiPath: string | undefined): NativeAddLoad {
  if (koffiPath === undefined) return { add: undefined, reason: 'koffi is not available' };
  const load = loadBlas(blasCandidates(), { koffiPath });
  if (!load.loaded)
    return {
      add: undefined,
      reason: load.tried.length === 0 ? load.reason : `no OpenBLAS loaded (${load.reason})`,
    };
  return { add: floatAdd(load.library) };
}

/** The reduce steps' arithmetic over a loaded library, cut into single-threaded pieces. */
export function floatAdd(library: BlasLibrary): NativeFloatAdd {
  const { saxpy, scopy, sscal } = library;
  return {
    library: library.path,
    addInto(target, incoming) {
      const length = target.length;
      for (let done = 0; done < length; done += SINGLE_THREAD_ELEMENTS) {
        const count = Math.min(SINGLE_THREAD_ELEMENTS, length - done);
        saxpy(count, 1, incoming.subarray(done, done + count), 1, target.subarray(done, done + count), 1);
      }
    },
    sumInto(target, own, incoming) {
      const length = target.length;
      for (let done = 0; done < length; done += SINGLE_THREAD_ELEMENTS) {
        const count = Math.min(SINGLE_THREAD_ELEMENTS, length - done);
        const into = target.subarray(done, done + count);
        scopy(count, own.subarray(done, done + count), 1, into, 1);
        saxpy(count, 1, incoming.subarray(done, done + count), 1, into, 1);
      }
    },
    scale(target, factor) {
      const length = target.length;
      for (let done = 0; done < length; done += SINGLE_THREAD_ELEMENTS) {
        const count = Math.min(SINGLE_THREAD_ELEMENTS, length - done);
        sscal(count, factor, target.subarray(done, done + count), 1);
      }
    },
  };
}
