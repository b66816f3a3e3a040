/**
 * WebAssembly SIMD reduction kernels over the thread ranks' shared arena ([Note: shm arena]):
 * the module imports the arena's memory, so its addresses are byte offsets into the ranks'
 * buffers themselves, and a reduction reads and writes them in place.
 *
 * [Note: in-place simd] `reduce(accumulator, source, bytes)` computes
 * accumulator[i] = accumulator[i] (op) source[i] over `bytes` (a multiple of 16: whole 4-lane
 * vectors; the caller does the last 0-3 elements with the scalar kernels, so nothing outside the
 * views is ever written); `reduceBoth` also stores the result into the source's lanes (the last
 * reduction of an all-reduce, whose last source is also a target: one pass instead of two). `divide(accumulator, bytes, divisor)` divides float32 lanes.
 * The arithmetic is the same as reduce-simd.ts ([Note: reduce simd layout]): bit for bit the
 * scalar kernels' results, NaN payloads aside.
 */

import {
  F32,
  functionBody,
  get,
  I32,
  increment,
  instantiate,
  load,
  loopWhileBelow,
  sharedMemoryImport,
  simd,
  store,
  text,
  V128,
  wasmModule,
} from '../wasm-assembly.js';
import {
  F32X4_ADD,
  F32X4_DIV,
  F32X4_GE,
  F32X4_LE,
  F32X4_NE,
  F32X4_SPLAT,
  I32_ADD,
  I32X4_ADD,
  I32X4_MAX_S,
  I32X4_MIN_S,
  LOCAL_SET,
  LOCAL_TEE,
  V128_BITSELECT,
  V128_OR,
} from '../wasm-opcodes.js';
import type { ReduceKernelName } from './reduce-simd.js';
import { ARENA_MAX_PAGES, type SharedMemory } from './shm-arena.js';

export interface InPlaceKernels {
  readonly reduce: Record<ReduceKernelName, (accumulator: number, source: number, bytes: number) => void>;
  /** `reduce`, with the result also stored into the source's lanes. */
  readonly reduceBoth: Record<ReduceKernelName, (accumulator: number, source: number, bytes: number) => void>;
  divide(accumulator: number, bytes: number, divisor: number): void;
}

// Parameters: 0 = accumulator address, 1 = source address (reducers) or bytes (divide), ...
const ACCUMULATOR = 0;
const SOURCE = 1;

/**
 * `end = accumulator + bytes; while (accumulator < end) { body; accumulator += 16; source += 16 }`
 * with `end` in local `endLocal`; `advanceSource` is false for divide.
 */
function loopOverVectors(bytes: number, endLocal: number, advanceSource: boolean, body: number[]): number[] {
  return [
    ...get(ACCUMULATOR),
    ...get(bytes),
    I32_ADD,
    LOCAL_SET,
    endLocal,
    ...loopWhileBelow(ACCUMULATOR, endLocal, [
      ...body,
      ...increment(ACCUMULATOR, 16),
      ...(advanceSource ? increment(SOURCE, 16) : []),
    ]),
  ];
}

// Reducers: (accumulator, source, bytes) and locals 3 = end (i32), 4, 5 = a, b (v128).
// `both`: the result is stored into the source's lanes too (the last step of a two-view all-reduce).
const A = 4;
const B = 5;
const alsoIntoSource = (both: boolean, result: number) =>
  both ? [LOCAL_TEE, result, ...store(0), ...get(SOURCE), ...get(result), ...store(0)] : store(0);

const lanewise = (instruction: number, both: boolean) =>
  loopOverVectors(2, 3, true, [
    ...get(ACCUMULATOR),
    ...get(ACCUMULATOR),
    ...load(0),
    ...get(SOURCE),
    ...load(0),
    ...simd(instruction),
    ...alsoIntoSource(both, A),
  ]);

/** a (compare) b || a != a ? a : b, with a the accumulator's lanes and b the source's. */
const selecting = (compare: number, both: boolean) =>
  loopOverVectors(2, 3, true, [
    ...get(ACCUMULATOR),
    ...get(ACCUMULATOR),
    ...load(0),
    LOCAL_TEE,
    A,
    ...get(SOURCE),
    ...load(0),
    LOCAL_TEE,
    B,
    ...get(A),
    ...get(B),
    ...simd(compare),
    ...get(A),
    ...get(A),
    ...simd(F32X4_NE),
    ...simd(V128_OR),
    ...simd(V128_BITSELECT),
    ...alsoIntoSource(both, B),
  ]);

// divide: (accumulator, bytes, divisor f32) and local 3 = end.
const divideBody = loopOverVectors(1, 3, false, [
  ...get(ACCUMULATOR),
  ...get(ACCUMULATOR),
  ...load(0),
  ...get(2),
  ...simd(F32X4_SPLAT),
  ...simd(F32X4_DIV),
  ...store(0),
]);

const reducers = (both: boolean): Record<ReduceKernelName, number[]> => ({
  sumFloat: lanewise(F32X4_ADD, both),
  maxFloat: selecting(F32X4_GE, both),
  minFloat: selecting(F32X4_LE, both),
  sumInt: lanewise(I32X4_ADD, both),
  maxInt: lanewise(I32X4_MAX_S, both),
  minInt: lanewise(I32X4_MIN_S, both),
});
const REDUCERS = reducers(false);
const REDUCERS_BOTH = reducers(true);
const NAMES = Object.keys(REDUCERS) as ReduceKernelName[];

function assemble(): Uint8Array {
  const bodies = [...NAMES.map((name) => REDUCERS[name]), ...NAMES.map((name) => REDUCERS_BOTH[name])];
  const reducerBodies = bodies.map((body) => functionBody([2, 1, I32, 2, V128], body));
  const divide = functionBody([1, 1, I32], divideBody);
  const names = [...NAMES, ...NAMES.map((name) => `${name}Both`), 'divide'];
  const exports = names.flatMap((name, index) => [...text(name), 0x00, index]);
  return wasmModule([
    [1, [2, 0x60, 3, I32, I32, I32, 0, 0x60, 3, I32, I32, F32, 0]],
    [2, sharedMemoryImport(ARENA_MAX_PAGES)],
    [3, [bodies.length + 1, ...bodies.map(() => 0), 1]],
    [7, [names.length, ...exports]],
    [10, [bodies.length + 1, ...reducerBodies.flat(), ...divide]],
  ]);
}

let instance: { memory: SharedMemory; kernels: InPlaceKernels | null } | undefined;

/**
 * This thread's kernels over `memory` (one arena per thread: the rank threads of one
 * spawnThreadRanks), or null where WebAssembly SIMD or shared memory is unavailable.
 */
export function inPlaceKernels(memory: SharedMemory): InPlaceKernels | null {
  if (instance !== undefined && instance.memory === memory) return instance.kernels;
  instance = { memory, kernels: null };
  const exported = instantiate(assemble(), { env: { memory } });
  if (exported === null) return null;
  instance.kernels = {
    reduce: Object.fromEntries(NAMES.map((name) => [name, exported[name]])) as InPlaceKernels['reduce'],
    reduceBoth: Object.fromEntries(
      NAMES.map((name) => [name, exported[`${name}Both`]]),
    ) as InPlaceKernels['reduceBoth'],
    divide: exported.divide as InPlaceKernels['divide'],
  };
  return instance.kernels;
}
