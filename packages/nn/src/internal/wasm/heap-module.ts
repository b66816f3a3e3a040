import { memoryImport, name, sectionId, vectorOf, wasmModule } from '@fsdp-ts/kernels';
import { type ElementwiseFunction, elementwiseCode, elementwiseType } from './elementwise-function';

/** Imported memories' limits: none beyond the 4 GiB of a 32-bit memory. */
const MAXIMUM_PAGES = 65536;

/**
 * The bytes of a module of element loops over an imported memory (env.memory, see
 * [Note: SIMD loops on the tfjs heap]), exporting each function under its name; `shared` when the
 * backend's memory is a shared (threaded build's) one.
 */
export function heapModuleBytes(
  functions: readonly (readonly [string, ElementwiseFunction])[],
  shared: boolean,
): Uint8Array {
  const types = functions.flatMap(([, definition]) => elementwiseType(definition));
  const memory = memoryImport(
    shared ? { minimumPages: 0, maximumPages: MAXIMUM_PAGES, shared: true } : { minimumPages: 0 },
  );
  const exports = functions.flatMap(([exportName], index) => [...name(exportName), 0x00, index]);
  const codes = functions.flatMap(([, definition]) => elementwiseCode(definition));
  const indices = functions.map((_, index) => index);
  return wasmModule([
    [sectionId.type, vectorOf(functions.length, types)],
    [sectionId.import, vectorOf(1, memory)],
    [sectionId.function, vectorOf(functions.length, indices)],
    [sectionId.export, vectorOf(functions.length, exports)],
    [sectionId.code, vectorOf(functions.length, codes)],
  ]);
}
