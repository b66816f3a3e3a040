import { type ElementwiseFunction, elementwiseCode, elementwiseType } from './elementwise-function';
import { nameBytes, section, sectionId, unsignedLeb, vectorOf } from './wasm-encoding';

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
  const limits = shared ? [0x03, 0, ...unsignedLeb(MAXIMUM_PAGES)] : [0x00, 0];
  const memoryImport = [...nameBytes('env'), ...nameBytes('memory'), 0x02, ...limits];
  const exports = functions.flatMap(([exportName], index) => [...nameBytes(exportName), 0x00, index]);
  const codes = functions.flatMap(([, definition]) => elementwiseCode(definition));
  const indices = functions.map((_, index) => index);
  return Uint8Array.from([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...section(sectionId.type, vectorOf(functions.length, types)),
    ...section(sectionId.import, vectorOf(1, memoryImport)),
    ...section(sectionId.function, vectorOf(functions.length, indices)),
    ...section(sectionId.export, vectorOf(functions.length, exports)),
    ...section(sectionId.code, vectorOf(functions.length, codes)),
  ]);
}
