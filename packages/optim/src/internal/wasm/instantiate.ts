/** The slice of the WebAssembly API used here (the package compiles without DOM/wasm lib types). */
interface WebAssemblyApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: Record<string, unknown> };
}

/**
 * Compiles and instantiates one of the package's hand-assembled modules (no imports) and returns
 * its exports, or null where WebAssembly or its SIMD instructions are unavailable (the caller then
 * runs its JavaScript loops).
 */
export function instantiateModule(bytes: Uint8Array): Record<string, unknown> | null {
  try {
    const wasm = (globalThis as unknown as { WebAssembly: WebAssemblyApi }).WebAssembly;
    return new wasm.Instance(new wasm.Module(bytes)).exports;
  } catch {
    return null;
  }
}
