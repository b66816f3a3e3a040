import type { ElementwiseFunction } from './elementwise-function';
import { heapModuleBytes } from './heap-module';

/**
 * Layer norm's per-row element loops as a WebAssembly module (f32x4 lanes, float32 arithmetic),
 * importing the tfjs wasm backend's memory as env.memory ([Note: SIMD loops on the tfjs heap]).
 * Exports, on byte addresses of one row (`width` elements) and the row's float32 scalars:
 *   layerNormRow(x, gamma, beta, y, mean, inverseStd, width)
 *     y = (x − mean)·inverseStd·γ + β
 *   layerNormGradRow(dy, x, gamma, dx, mean, inverseStd, meanScaled, meanProjection, width)
 *     dx = inverseStd·(dy·γ − meanScaled − (x − mean)·inverseStd·meanProjection)
 * in the JavaScript loops' order of operations (`layer-norm-kernel.ts`). The reductions (row
 * statistics, column sums) stay JavaScript float64 ([Note: float64 column sums]).
 */
const layerNormRow: ElementwiseFunction = {
  pointers: 4,
  scalars: 2,
  temporaries: 0,
  step: (lanes) => {
    const normalised = [...lanes.load(0), ...lanes.scalar(0), ...lanes.sub, ...lanes.scalar(1), ...lanes.mul];
    return lanes.store(3, [...normalised, ...lanes.load(1), ...lanes.mul, ...lanes.load(2), ...lanes.add]);
  },
};

const layerNormGradRow: ElementwiseFunction = {
  pointers: 4,
  scalars: 4,
  temporaries: 0,
  step: (lanes) => {
    const normalised = [...lanes.load(1), ...lanes.scalar(0), ...lanes.sub, ...lanes.scalar(1), ...lanes.mul];
    const scaled = [...lanes.load(0), ...lanes.load(2), ...lanes.mul];
    const centred = [
      ...scaled,
      ...lanes.scalar(2),
      ...lanes.sub,
      ...normalised,
      ...lanes.scalar(3),
      ...lanes.mul,
    ];
    return lanes.store(3, [...lanes.scalar(1), ...centred, ...lanes.sub, ...lanes.mul]);
  },
};

const FUNCTIONS = [
  ['layerNormRow', layerNormRow],
  ['layerNormGradRow', layerNormGradRow],
] as const;

/** The module's bytes; `shared` when the backend's memory is a shared (threaded) one. */
export function layerNormSimdModuleBytes(shared: boolean): Uint8Array {
  return heapModuleBytes(FUNCTIONS, shared);
}
