import { HeapInstances } from './heap-instance';
import { layerNormSimdModuleBytes } from './layer-norm-simd-module';

/** Layer norm's per-row SIMD loops on one tfjs wasm heap (byte addresses, row scalars, width). */
export interface LayerNormSimd {
  layerNormRow(
    x: number,
    gamma: number,
    beta: number,
    y: number,
    mean: number,
    inverseStd: number,
    width: number,
  ): void;
  layerNormGradRow(
    dy: number,
    x: number,
    gamma: number,
    dx: number,
    mean: number,
    inverseStd: number,
    meanScaled: number,
    meanProjection: number,
    width: number,
  ): void;
}

let calls = 0;

const instances = new HeapInstances<LayerNormSimd>(layerNormSimdModuleBytes, (exports) => {
  const row = exports.layerNormRow as LayerNormSimd['layerNormRow'];
  const gradRow = exports.layerNormGradRow as LayerNormSimd['layerNormGradRow'];
  return {
    layerNormRow(...args) {
      calls++;
      row(...args);
    },
    layerNormGradRow(...args) {
      calls++;
      gradRow(...args);
    },
  };
});

/**
 * Layer norm's SIMD loops over `backend`'s heap (instantiated on first use per memory), or null
 * when the heap is not reachable and the caller runs its JavaScript loops
 * ([Note: SIMD loops on the tfjs heap]).
 */
export function layerNormSimdFor(backend: unknown): LayerNormSimd | null {
  return instances.forBackend(backend);
}

/** How many SIMD row calls ran in this process (tests check the SIMD path is taken). */
export function layerNormSimdCalls(): number {
  return calls;
}
