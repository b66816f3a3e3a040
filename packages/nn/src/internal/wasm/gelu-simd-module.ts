import { CUBIC, TWO_SQRT_2_OVER_PI } from '../gelu-constants';
import type { ElementwiseFunction } from './elementwise-function';
import { heapModuleBytes } from './heap-module';

/**
 * tanh GELU's element loops as a WebAssembly module (f32x4 lanes, float32 arithmetic), assembled
 * here so the package ships no binary. It imports the tfjs wasm backend's memory as env.memory
 * (see [Note: SIMD loops on the tfjs heap]) and exports, on byte addresses in it:
 *   geluInner(x, u, count)      u = 2·√(2/π)·(x + 0.044715·x·x·x)
 *   geluGrad(dy, x, s, dx, count)
 *     dx = dy · (s + x·s·(1 − s)·2·√(2/π)·(1 + 3·0.044715·x·x))
 * in the JavaScript loops' order of operations (`gelu-kernel.ts`), rounded to float32 at each step.
 */
const [X, S] = [0, 1];

const geluInner: ElementwiseFunction = {
  pointers: 2,
  temporaries: 1,
  step: (lanes) => {
    const cube = [
      ...lanes.constant(CUBIC),
      ...lanes.get(X),
      ...lanes.mul,
      ...lanes.get(X),
      ...lanes.mul,
      ...lanes.get(X),
      ...lanes.mul,
    ];
    const inner = [...lanes.load(0), ...lanes.tee(X), ...cube, ...lanes.add];
    return lanes.store(1, [...lanes.constant(TWO_SQRT_2_OVER_PI), ...inner, ...lanes.mul]);
  },
};

const geluGrad: ElementwiseFunction = {
  pointers: 4,
  temporaries: 2,
  step: (lanes) => {
    const slope = [
      ...[...lanes.get(X), ...lanes.get(S), ...lanes.mul], // x·s
      ...[...lanes.constant(1), ...lanes.get(S), ...lanes.sub, ...lanes.mul], // ·(1 − s)
      ...[...lanes.constant(TWO_SQRT_2_OVER_PI), ...lanes.mul],
      ...[...lanes.constant(1), ...lanes.constant(3 * CUBIC), ...lanes.get(X), ...lanes.get(X)],
      ...[...lanes.mul, ...lanes.mul, ...lanes.add, ...lanes.mul], // ·(1 + 3·0.044715·x·x)
    ];
    const derivative = [...lanes.get(S), ...slope, ...lanes.add];
    return [
      ...lanes.load(1),
      ...lanes.set(X),
      ...lanes.load(2),
      ...lanes.set(S),
      ...lanes.store(3, [...lanes.load(0), ...derivative, ...lanes.mul]),
    ];
  },
};

const FUNCTIONS = [
  ['geluInner', geluInner],
  ['geluGrad', geluGrad],
] as const;

/** The module's bytes; `shared` when the backend's memory is a shared (threaded) one. */
export function geluSimdModuleBytes(shared: boolean): Uint8Array {
  return heapModuleBytes(FUNCTIONS, shared);
}
