import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { type NativeSwitch, readNativeSwitch } from './native-switch.js';

/**
 * [Note: blas reduce steps]
 * On the native tcp data path, float32 sum and avg reduce steps add the incoming values into the
 * work array in place with OpenBLAS's `cblas_saxpy(n, 1, incoming, 1, work, 1)`, called through
 * koffi from the communication worker's thread: one pass (read two, write one) instead of the
 * SIMD kernel's two V8 copies per block ([Note: simd reduce steps] in ring-step-simd-reduce.ts).
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
 * sets it for matMul). Collectives never sets it: every call is cut into pieces of at most
 * SINGLE_THREAD_ELEMENTS, so it always runs on the calling thread.
 *
 * The library is collectives' own load (this package does not depend on @fsdp-ts/tensor): the
 * same file as the tensor package's when both load (`FSDP_BLAS_LIBRARY` first, then Debian's and
 * other Linux names), so the process maps it once. Linux only, like the rest of the native path.
 * The engine loads it when it starts, before its peers connect: loading starts OpenBLAS's thread
 * pool, whose idle threads spin a while before they sleep, which would otherwise compete with the
 * group's first ops.
 */
export const SINGLE_THREAD_ELEMENTS = 10_000;

/** Where OpenBLAS is looked for (after FSDP_BLAS_LIBRARY, which is then the only candidate). */
const LIBRARY_CANDIDATES: readonly string[] = [
  'libopenblas.so.0',
  'libopenblas.so',
  '/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0',
  '/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0',
];

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

/** `FSDP_TCP_BLAS`: unset for the BLAS reduce when OpenBLAS loads, 0 for the SIMD kernels, 1 to require it. */
export type BlasSetting = NativeSwitch;

export function blasSetting(rank: number): BlasSetting {
  return readNativeSwitch(
    'FSDP_TCP_BLAS',
    rank,
    'unset FSDP_TCP_BLAS to add float32 sums with OpenBLAS when it loads, set it to 0 to use the WebAssembly SIMD kernels, or to 1 to fail when OpenBLAS cannot load.',
  );
}

/**
 * Native arithmetic for the reduce steps of a run on the native data path: `add` when OpenBLAS
 * loaded and FSDP_TCP_BLAS is not 0; `counts` counts float32 sum and avg steps by path
 * (blasReduceCounts).
 */
export interface NativeReduce {
  readonly add: NativeFloatAdd | undefined;
  readonly counts: Int32Array | undefined;
}

/**
 * The reduce an engine's native runs use, loaded when the engine starts, before its peers
 * connect, not at the first sum: loading starts OpenBLAS's thread pool, whose idle threads spin
 * (~60 ms of CPU) before they sleep, and that belongs in the group's start, not in its first
 * ops. `failure` says why FSDP_TCP_BLAS=1 (`required`) cannot be honoured.
 */
export function engineReduce(options: {
  setting: BlasSetting | undefined;
  nativePath: boolean;
  koffiPath: string | undefined;
  counts: Int32Array | undefined;
}): { reduce: NativeReduce; failure?: string } {
  const { setting, nativePath, koffiPath, counts } = options;
  const loaded =
    nativePath && setting !== undefined && setting !== 'off' ? loadNativeFloatAdd(koffiPath) : undefined;
  const reduce = { add: loaded?.add, counts };
  if (setting !== 'required' || !nativePath || loaded?.add !== undefined) return { reduce };
  return {
    reduce,
    failure: `FSDP_TCP_BLAS=1, but OpenBLAS's cblas_saxpy could not load (${loaded === undefined ? 'the native path is off' : loaded.reason}); install OpenBLAS (Debian: apt-get install libopenblas0-pthread), point FSDP_BLAS_LIBRARY at it, or unset FSDP_TCP_BLAS to use the SIMD kernels.`,
  };
}

interface KoffiLibrary {
  func(signature: string): (...args: unknown[]) => unknown;
}
interface Koffi {
  load(path: string): KoffiLibrary;
}

export type NativeAddLoad = { add: NativeFloatAdd } | { add: undefined; reason: string };

/** Loads cblas_saxpy and cblas_scopy through koffi at `koffiPath`; never throws. */
export function loadNativeFloatAdd(koffiPath: string | undefined): NativeAddLoad {
  if (koffiPath === undefined) return { add: undefined, reason: 'koffi is not available' };
  let koffi: Koffi;
  try {
    koffi = createRequire(moduleUrl())(koffiPath) as Koffi;
  } catch (error) {
    return { add: undefined, reason: `koffi did not load (${firstLine(error)})` };
  }
  const chosen = process.env.FSDP_BLAS_LIBRARY;
  const candidates = chosen !== undefined && chosen !== '' ? [chosen] : LIBRARY_CANDIDATES;
  const failures: string[] = [];
  for (const candidate of candidates) {
    try {
      const library = koffi.load(candidate);
      const saxpy = library.func('void cblas_saxpy(int, float, const void *, int, void *, int)');
      const scopy = library.func('void cblas_scopy(int, const void *, int, void *, int)');
      const sscal = library.func('void cblas_sscal(int, float, void *, int)');
      return { add: floatAdd(candidate, saxpy, scopy, sscal) };
    } catch (error) {
      failures.push(`${candidate}: ${firstLine(error)}`);
    }
  }
  return { add: undefined, reason: `no OpenBLAS loaded (${failures.join('; ')})` };
}

function floatAdd(
  library: string,
  saxpy: (...args: unknown[]) => unknown,
  scopy: (...args: unknown[]) => unknown,
  sscal: (...args: unknown[]) => unknown,
): NativeFloatAdd {
  return {
    library,
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

/**
 * How many reduce steps each path ran, per process (every tcp group of it): a SharedArrayBuffer
 * the main thread creates and posts to each tcp communication worker, which adds to it. An
 * internal diagnostic, not API: the tests read it (blasReduceCounts) to prove which path ran,
 * since both give the same results.
 */
let counts: Int32Array | undefined;

export function blasReduceCountBuffer(): Int32Array {
  counts ??= new Int32Array(new SharedArrayBuffer(8));
  return counts;
}

export function countReduceStep(buffer: Int32Array | undefined, path: 'blas' | 'simd'): void {
  if (buffer !== undefined) Atomics.add(buffer, path === 'blas' ? 0 : 1, 1);
}

/** Float32 sum/avg reduce steps run through BLAS and through the SIMD kernels, in this process. */
export function blasReduceCounts(): { blas: number; simd: number } {
  const buffer = blasReduceCountBuffer();
  return { blas: Atomics.load(buffer, 0), simd: Atomics.load(buffer, 1) };
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!;
}

/** This module's URL; the CJS build has no import.meta, but has __filename. */
function moduleUrl(): string {
  const url: unknown = import.meta.url;
  if (typeof url === 'string') return url;
  return pathToFileURL(__filename).href;
}
