import { type WasmMemory, webAssembly } from '@fsdp-ts/kernels';
import { backendMemory, isSharedMemory } from './backend-memory';

/**
 * One module of element loops instantiated on a tfjs wasm backend's heap, once per memory
 * ([Note: SIMD loops on the tfjs heap]): `forBackend` answers the wrapped exports, or null when
 * the heap is not reachable or the module does not compile (no WebAssembly SIMD), and the caller
 * runs its JavaScript loop.
 */
export class HeapInstances<Exports> {
  private readonly instances = new WeakMap<WasmMemory, Exports | null>();

  constructor(
    private readonly moduleBytes: (shared: boolean) => Uint8Array,
    private readonly wrap: (exports: Record<string, unknown>) => Exports,
  ) {}

  forBackend(backend: unknown): Exports | null {
    const memory = backendMemory(backend);
    if (memory === null) return null;
    let instance = this.instances.get(memory);
    if (instance === undefined) {
      instance = this.instantiate(memory);
      this.instances.set(memory, instance);
    }
    return instance;
  }

  private instantiate(memory: WasmMemory): Exports | null {
    const api = webAssembly()!; // backendMemory found a WebAssembly.Memory
    try {
      const module = new api.Module(this.moduleBytes(isSharedMemory(memory)));
      return this.wrap(new api.Instance(module, { env: { memory } }).exports);
    } catch {
      return null; // no WebAssembly SIMD here: the JavaScript loops run instead
    }
  }
}
