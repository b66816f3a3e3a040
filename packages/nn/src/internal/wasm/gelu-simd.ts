import { geluSimdModuleBytes } from './gelu-simd-module';
import { HeapInstances } from './heap-instance';

/** tanh GELU's SIMD loops on one tfjs wasm heap (byte addresses, element counts). */
export interface GeluSimd {
  geluInner(x: number, u: number, count: number): void;
  geluGrad(dy: number, x: number, s: number, dx: number, count: number): void;
}

let calls = 0;

const instances = new HeapInstances<GeluSimd>(geluSimdModuleBytes, (exports) => {
  const inner = exports.geluInner as GeluSimd['geluInner'];
  const grad = exports.geluGrad as GeluSimd['geluGrad'];
  return {
    geluInner(x, u, count) {
      calls++;
      inner(x, u, count);
    },
    geluGrad(dy, x, s, dx, count) {
      calls++;
      grad(dy, x, s, dx, count);
    },
  };
});

/**
 * The GELU SIMD loops over `backend`'s heap, instantiated on first use per memory (see
 * [Note: SIMD loops on the tfjs heap]); null when the heap is not reachable or the module does
 * not compile, and the caller runs its JavaScript loop.
 */
export function geluSimdFor(backend: unknown): GeluSimd | null {
  return instances.forBackend(backend);
}

/** How many SIMD loop calls ran in this process (tests check the SIMD path is taken). */
export function geluSimdCalls(): number {
  return calls;
}
