import { CUBIC, TWO_SQRT_2_OVER_PI } from '../gelu-constants';
import { type ElementwiseFunction, elementwiseCode, elementwiseType } from './elementwise-function';
import { nameBytes, section, sectionId, unsignedLeb, vectorOf } from './wasm-encoding';

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

/** Imported memories' limits: none beyond the 4 GiB of a 32-bit memory. */
const MAXIMUM_PAGES = 65536;

/** The module's bytes; `shared` when the backend's memory is a shared (threaded) one. */
export function geluSimdModuleBytes(shared: boolean): Uint8Array {
  const types = FUNCTIONS.flatMap(([, definition]) => elementwiseType(definition));
  const limits = shared ? [0x03, 0, ...unsignedLeb(MAXIMUM_PAGES)] : [0x00, 0];
  const memoryImport = [...nameBytes('env'), ...nameBytes('memory'), 0x02, ...limits];
  const exports = FUNCTIONS.flatMap(([exportName], index) => [...nameBytes(exportName), 0x00, index]);
  const codes = FUNCTIONS.flatMap(([, definition]) => elementwiseCode(definition));
  const indices = FUNCTIONS.map((_, index) => index);
  return Uint8Array.from([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...section(sectionId.type, vectorOf(FUNCTIONS.length, types)),
    ...section(sectionId.import, vectorOf(1, memoryImport)),
    ...section(sectionId.function, vectorOf(FUNCTIONS.length, indices)),
    ...section(sectionId.export, vectorOf(FUNCTIONS.length, exports)),
    ...section(sectionId.code, vectorOf(FUNCTIONS.length, codes)),
  ]);
}
