/**
 * Loading a CBLAS (OpenBLAS) through koffi, an FFI whose prebuilt binaries ship inside its npm
 * package, so nothing is compiled at install time.
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

export interface BlasLibrary {
  /** What was loaded: the candidate name or path that succeeded. */
  path: string;
  /** `openblas_get_config()` when the library is OpenBLAS, else null. */
  config: string | null;
  sgemm: Sgemm;
  /** The thread count in effect after `setThreads`, or null if the library cannot set it. */
  threads: number | null;
}

export type BlasLoadResult =
  | { loaded: true; library: BlasLibrary }
  | { loaded: false; tried: string[]; reason: string };

interface KoffiLibrary {
  func(signature: string): (...args: unknown[]) => unknown;
}
interface Koffi {
  load(path: string): KoffiLibrary;
}

/** Tries `candidates` in order; sets the thread count on the first that loads. Never throws. */
export async function loadBlas(candidates: readonly string[], threads: number): Promise<BlasLoadResult> {
  let koffi: Koffi;
  try {
    const module = (await import('koffi')) as unknown as { default?: Koffi } & Koffi;
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
    let sgemm: Sgemm;
    try {
      sgemm = library.func(
        'void cblas_sgemm(int, int, int, int, int, int, float, float *, int, float *, int, float, float *, int)',
      ) as Sgemm;
    } catch (error) {
      failures.push(`${candidate}: no cblas_sgemm (${firstLine(error)})`);
      continue;
    }
    return { loaded: true, library: { path: candidate, sgemm, ...openBlasExtras(library, threads) } };
  }
  return { loaded: false, tried: [...candidates], reason: failures.join('; ') };
}

function openBlasExtras(
  library: KoffiLibrary,
  threads: number,
): { config: string | null; threads: number | null } {
  let config: string | null = null;
  let applied: number | null = null;
  try {
    config = String(library.func('const char *openblas_get_config()')());
  } catch {
    // not OpenBLAS: no config string
  }
  try {
    library.func('void openblas_set_num_threads(int)')(threads);
    applied = Number(library.func('int openblas_get_num_threads()')());
  } catch {
    // not OpenBLAS: the library's own default thread count stays
  }
  return { config, threads: applied };
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!;
}
