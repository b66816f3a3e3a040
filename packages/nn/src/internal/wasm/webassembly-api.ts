/** The slice of the WebAssembly JavaScript API nn uses (the package compiles without its lib types). */
export interface WasmMemory {
  readonly buffer: ArrayBufferLike;
}

interface WebAssemblyApi {
  Memory: abstract new (...args: never[]) => WasmMemory;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> };
}

/** The engine's WebAssembly namespace, or undefined where there is none. */
export function webAssembly(): WebAssemblyApi | undefined {
  return (globalThis as unknown as { WebAssembly?: WebAssemblyApi }).WebAssembly;
}
