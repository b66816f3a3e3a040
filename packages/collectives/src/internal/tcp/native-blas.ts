import { loadNativeFloatAdd, type NativeFloatAdd } from '@fsdp-ts/kernels';
import { type NativeSwitch, readNativeSwitch } from './native-switch.js';

/**
 * When the tcp engine reduces float32 sums with OpenBLAS: the setting, the load when the engine
 * starts, and the counts of each path. The arithmetic and its exactness are @fsdp-ts/kernels'
 * ([Note: blas reduce steps] in its blas-reduce.ts). The engine loads the library when it starts,
 * before its peers connect: loading starts OpenBLAS's thread pool, whose idle threads spin a while
 * before they sleep, which would otherwise compete with the group's first ops. Linux only, like
 * the rest of the native path.
 */

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
