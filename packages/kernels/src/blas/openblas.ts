import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

/**
 * The one OpenBLAS loader of fsdp-ts: a CBLAS loaded through koffi, an FFI whose prebuilt
 * binaries ship inside its npm package, so nothing is compiled at install time. tensor's matMul
 * kernels (cblas_sgemm, on the main thread) and collectives' reduce steps (cblas_saxpy, scopy and
 * sscal, in the communication worker's thread) both load it here, so the two find the same file
 * (`FSDP_BLAS_LIBRARY` first, then the search order below) and the process maps it once. koffi is
 * an optional peer dependency: where it does not load, the load says so and nothing throws.
 *
 * [Note: BLAS search order]
 * `FSDP_BLAS_LIBRARY` (a path or soname) is the only candidate when set. Otherwise the first of
 * these that loads and exports `cblas_sgemm` wins:
 *   1. libopenblas.so.0   (Debian/Ubuntu `libopenblas0-pthread`, Fedora `openblas`, via ld.so)
 *   2. libopenblas.so     (a development symlink)
 *   3. /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 and the aarch64 twin (Debian's
 *      real files, for when the alternatives symlink is missing)
 *   4. libopenblas.dylib, /opt/homebrew/opt/openblas/lib/libopenblas.dylib,
 *      /usr/local/opt/openblas/lib/libopenblas.dylib (macOS, Homebrew)
 *   5. libopenblas.dll    (Windows, on PATH)
 */
export const blasSearchOrder: readonly string[] = [
  'libopenblas.so.0',
  'libopenblas.so',
  '/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0',
  '/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0',
  'libopenblas.dylib',
  '/opt/homebrew/opt/openblas/lib/libopenblas.dylib',
  '/usr/local/opt/openblas/lib/libopenblas.dylib',
  'libopenblas.dll',
];

/** CBLAS enum values (cblas.h). */
export const CBLAS_ROW_MAJOR = 101;
/** CBLAS's "no transpose" flag. */
export const CBLAS_NO_TRANSPOSE = 111;
/** CBLAS's "transpose" flag. */
export const CBLAS_TRANSPOSE = 112;

/** The candidates to try: `FSDP_BLAS_LIBRARY` alone when it is set, else blasSearchOrder. */
export function blasCandidates(environment: NodeJS.ProcessEnv = process.env): readonly string[] {
  const chosen = environment.FSDP_BLAS_LIBRARY;
  return chosen !== undefined && chosen !== '' ? [chosen] : blasSearchOrder;
}

/**
 * C = alpha · op(A) · op(B) + beta · C, row-major. koffi hands C a pointer to each typed array's
 * own memory (at its byteOffset), so views of the wasm heap are computed in place, never copied.
 */
export type Sgemm = (
  layout: number,
  transposeA: number,
  transposeB: number,
  m: number,
  n: number,
  k: number,
  alpha: number,
  a: Float32Array,
  lda: number,
  b: Float32Array,
  ldb: number,
  beta: number,
  c: Float32Array,
  ldc: number,
) => void;

/** y[i] = alpha · x[i] + y[i] for i < n (strides 1 here). */
export type Saxpy = (
  n: number,
  alpha: number,
  x: Float32Array,
  incX: number,
  y: Float32Array,
  incY: number,
) => void;
/** y[i] = x[i] for i < n. */
export type Scopy = (n: number, x: Float32Array, incX: number, y: Float32Array, incY: number) => void;
/** x[i] = alpha · x[i] for i < n. */
export type Sscal = (n: number, alpha: number, x: Float32Array, incX: number) => void;

/** A loaded CBLAS: the level-3 and level-1 calls fsdp-ts uses. */
export interface BlasLibrary {
  /** What was loaded: the candidate name or path that succeeded. */
  path: string;
  /** `openblas_get_config()` when the library is OpenBLAS, else null. */
  config: string | null;
  sgemm: Sgemm;
  saxpy: Saxpy;
  scopy: Scopy;
  sscal: Sscal;
  /**
   * OpenBLAS's thread count after the load (`openblas_get_num_threads`, set first when the load
   * asked for a count), or null if the library cannot tell.
   */
  threads: number | null;
}

/** What a load found: the library, or what was tried and why each failed (`tried` is empty when koffi itself did not load). */

export type BlasLoadResult =
  | { loaded: true; library: BlasLibrary }
  | { loaded: false; tried: string[]; reason: string };

interface KoffiLibrary {
  func(signature: string): (...args: unknown[]) => unknown;
}
interface Koffi {
  load(path: string): KoffiLibrary;
}

/** How to load: where koffi is (a resolved path, e.g. from another thread; else `koffi` from here) and the thread count to set. */
export interface BlasLoadOptions {
  /** The koffi module to require (a path or a package name); `koffi` when left out. */
  koffiPath?: string | undefined;
  /** OpenBLAS threads to set (process-global); left as it is when left out. */
  threads?: number | undefined;
}

/**
 * Tries `candidates` in order (blasCandidates() when left out); the first that loads and exports
 * the CBLAS calls of BlasLibrary wins, and gets the thread count when one is asked for. Never
 * throws.
 */
export function loadBlas(
  candidates: readonly string[] = blasCandidates(),
  options: BlasLoadOptions = {},
): BlasLoadResult {
  let koffi: Koffi;
  try {
    const module = createRequire(moduleUrl())(options.koffiPath ?? 'koffi') as { default?: Koffi } & Koffi;
    koffi = module.default ?? module;
  } catch (error) {
    return { loaded: false, tried: [], reason: `koffi did not load (${firstLine(error)})` };
  }
  const failures: string[] = [];
  for (const candidate of candidates) {
    let library: KoffiLibrary;
    try {
      library = koffi.load(candidate);
    } catch (error) {
      failures.push(`${candidate}: ${firstLine(error)}`);
      continue;
    }
    let calls: Pick<BlasLibrary, 'sgemm' | 'saxpy' | 'scopy' | 'sscal'>;
    try {
      calls = {
        sgemm: library.func(
          'void cblas_sgemm(int, int, int, int, int, int, float, float *, int, float *, int, float, float *, int)',
        ) as Sgemm,
        saxpy: library.func('void cblas_saxpy(int, float, const void *, int, void *, int)') as Saxpy,
        scopy: library.func('void cblas_scopy(int, const void *, int, void *, int)') as Scopy,
        sscal: library.func('void cblas_sscal(int, float, void *, int)') as Sscal,
      };
    } catch (error) {
      failures.push(`${candidate}: not a CBLAS (${firstLine(error)})`);
      continue;
    }
    return {
      loaded: true,
      library: { path: candidate, ...calls, ...openBlasExtras(library, options.threads) },
    };
  }
  return { loaded: false, tried: [...candidates], reason: failures.join('; ') };
}

function openBlasExtras(
  library: KoffiLibrary,
  threads: number | undefined,
): { config: string | null; threads: number | null } {
  let config: string | null = null;
  let applied: number | null = null;
  try {
    config = String(library.func('const char *openblas_get_config()')());
  } catch {
    // not OpenBLAS: no config string
  }
  try {
    if (threads !== undefined) library.func('void openblas_set_num_threads(int)')(threads);
    applied = Number(library.func('int openblas_get_num_threads()')());
  } catch {
    // not OpenBLAS: the library's own default thread count stays
  }
  return { config, threads: applied };
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
