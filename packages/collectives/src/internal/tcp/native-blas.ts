import { loadNativeFloatAdd, type NativeFloatAdd } from '@fsdp-ts/kernels';
import { type NativeSwitch, readNativeSwitch } from './native-sockets.js';
import { COUNTER, count, tcpCounters } from './tcp-connections.js';

/** `FSDP_TCP_BLAS`: float32 sums through OpenBLAS on the native path ([Note: blas reduce steps]). */
export function blasSetting(rank: number): NativeSwitch {
  return readNativeSwitch(
    'FSDP_TCP_BLAS',
    rank,
    'unset FSDP_TCP_BLAS to add float32 sums with OpenBLAS when it loads, set it to 0 to use the WebAssembly SIMD kernels, or to 1 to fail when OpenBLAS cannot load.',
  );
}

export interface NativeReduce {
  readonly add: NativeFloatAdd | undefined;
  readonly counts: Int32Array | undefined;
}

/**
 * The reduce an engine's native runs use, loaded when the engine starts, before its peers
 * connect: OpenBLAS's thread pool spins (~60 ms of CPU) before it sleeps, which belongs in the
 * group's start, not its first ops. `failure` says why FSDP_TCP_BLAS=1 cannot be honoured.
 */
export function engineReduce(options: {
  setting: NativeSwitch | undefined;
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

export function countReduceStep(buffer: Int32Array | undefined, path: 'blas' | 'simd'): void {
  count(buffer, path === 'blas' ? COUNTER.blasSteps : COUNTER.simdSteps);
}

/** Test hook: float32 sum/avg reduce steps through BLAS and through SIMD in this process. */
export function blasReduceCounts(): { blas: number; simd: number } {
  const buffer = tcpCounters();
  return { blas: Atomics.load(buffer, COUNTER.blasSteps), simd: Atomics.load(buffer, COUNTER.simdSteps) };
}
