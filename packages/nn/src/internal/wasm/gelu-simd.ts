import { backendMemory, isSharedMemory } from './backend-memory';
import { geluSimdModuleBytes } from './gelu-simd-module';
import { type WasmMemory, webAssembly } from './webassembly-api';

/** tanh GELU's SIMD loops on one tfjs wasm heap (byte addresses, element counts). */
export interface GeluSimd {
  geluInner(x: number, u: number, count: number): void;
  geluGrad(dy: number, x: number, s: number, dx: number, count: number): void;
}

const instances = new WeakMap<WasmMemory, GeluSimd | null>();
let calls = 0;

/**
 * The GELU SIMD loops over `backend`'s heap, instantiated on first use per memory (see
 * [Note: SIMD loops on the tfjs heap]); null when the heap is not reachable or the module does
 * not compile, and the caller runs its JavaScript loop.
 */
export function geluSimdFor(backend: unknown): GeluSimd | null {
  const memory = backendMemory(backend);
  if (memory === null) return null;
  let simd = instances.get(memory);
  if (simd === undefined) {
    simd = instantiate(memory);
    instances.set(memory, simd);
  }
  return simd;
}

function instantiate(memory: WasmMemory): GeluSimd | null {
  const api = webAssembly()!; // backendMemory found a WebAssembly.Memory
  let exports: Record<string, unknown>;
  try {
    const module = new api.Module(geluSimdModuleBytes(isSharedMemory(memory)));
    exports = new api.Instance(module, { env: { memory } }).exports;
  } catch {
    return null; // no WebAssembly SIMD here: the JavaScript loops run instead
  }
  const inner = exports.geluInner as (x: number, u: number, count: number) => void;
  const grad = exports.geluGrad as (dy: number, x: number, s: number, dx: number, count: number) => void;
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
}

/** How many SIMD loop calls ran in this process (tests check the SIMD path is taken). */
export function geluSimdCalls(): number {
  return calls;
}
