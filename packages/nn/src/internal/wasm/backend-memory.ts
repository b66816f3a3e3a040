import { type WasmMemory, webAssembly } from '@fsdp-ts/kernels';

/**
 * [Note: SIMD loops on the tfjs heap]
 * tfjs-backend-wasm keeps every tensor in one WebAssembly.Memory (its Emscripten module's
 * exported `memory`, reachable as `backend.wasm.asm.memory` in tfjs 4.22; `HEAPU8` is a view of
 * it). A small module of nn's own that imports that memory runs 128-bit SIMD loops directly on
 * tensors' bytes: a tensor's address is the `byteOffset` of `backend.typedArrayFromHeap(info)`,
 * so nothing is copied. The backend growing its heap keeps the same Memory object (only views
 * detach, see [Note: array kernels]), so one instance per Memory serves for the backend's life.
 * The loops read and write only [address, address + 4·count) of each tensor: whole groups of four
 * as f32x4, the remainder one float at a time.
 * When the memory is not reachable that way (another tfjs build or version) or the engine has no
 * WebAssembly SIMD, `backendMemory` / the instance lookup answer null and the kernels run their
 * JavaScript loops instead (same results up to float32 rounding, slower).
 */
export function backendMemory(backend: unknown): WasmMemory | null {
  const api = webAssembly();
  const wasm = (backend as { wasm?: { asm?: { memory?: unknown }; HEAPU8?: Uint8Array } }).wasm;
  const memory = wasm?.asm?.memory;
  if (api === undefined || !(memory instanceof api.Memory)) return null;
  // The heap views must be views of this memory, or addresses from them mean nothing in it.
  if (wasm?.HEAPU8 !== undefined && wasm.HEAPU8.buffer !== memory.buffer) return null;
  return memory;
}

/** True when `memory` is a shared (threaded build's) memory: its importers must say so. */
export function isSharedMemory(memory: WasmMemory): boolean {
  return typeof SharedArrayBuffer !== 'undefined' && memory.buffer instanceof SharedArrayBuffer;
}
