/**
 * WebAssembly SIMD reduction kernels over the thread ranks' shared arena ([Note: shm arena]):
 * the module imports the arena's memory, so its addresses are byte offsets into the ranks'
 * buffers themselves, and a reduction reads and writes them in place.
 *
 * [Note: in-place simd] `reduce(accumulator, source, bytes)` computes
 * accumulator[i] = accumulator[i] (op) source[i] over `bytes` (a multiple of 16: whole 4-lane
 * vectors; the caller does the last 0-3 elements with the scalar kernels, so nothing outside the
 * views is ever written); `reduceBoth` also stores the result into the source's lanes (the last
 * reduction of an all-reduce, whose last source is also a target: one pass instead of two);
 * `reduceInto(accumulator, source, bytes, target)` stores the result into a third view (a
 * reduce-scatter's first step into its output, with no copy of the first source).
 * `divide(accumulator, bytes, divisor)` divides float32 lanes.
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
  /**
   * target[i] = accumulator[i] (op) source[i]: the result stored into a third view, which may be
   * either operand exactly (each lane is loaded before it is stored) or overlap neither.
   */
  readonly reduceInto: Record<
    ReduceKernelName,
    (accumulator: number, source: number, bytes: number, target: number) => void
  >;
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

// Reducers into a third view: (accumulator, source, bytes, target), locals 4 = end (i32), 5, 6 =
// a, b (v128). Both operands are loaded before the result is stored.
const TARGET = 3;
const INTO_END = 4;
const INTO_A = 5;
const INTO_B = 6;
const intoTarget = (body: number[]) => [
  ...get(ACCUMULATOR),
  ...get(2),
  I32_ADD,
  LOCAL_SET,
  INTO_END,
  ...loopWhileBelow(ACCUMULATOR, INTO_END, [
    ...body,
    ...increment(ACCUMULATOR, 16),
    ...increment(SOURCE, 16),
    ...increment(TARGET, 16),
  ]),
];
const lanewiseInto = (instruction: number) =>
  intoTarget([
    ...get(TARGET),
    ...get(ACCUMULATOR),
    ...load(0),
    ...get(SOURCE),
    ...load(0),
    ...simd(instruction),
    ...store(0),
  ]);
/** As `selecting`: a (compare) b || a != a ? a : b, stored into the target. */
const selectingInto = (compare: number) =>
  intoTarget([
    ...get(TARGET),
    ...get(ACCUMULATOR),
    ...load(0),
    LOCAL_TEE,
    INTO_A,
    ...get(SOURCE),
    ...load(0),
    LOCAL_TEE,
    INTO_B,
    ...get(INTO_A),
    ...get(INTO_B),
    ...simd(compare),
    ...get(INTO_A),
    ...get(INTO_A),
    ...simd(F32X4_NE),
    ...simd(V128_OR),
    ...simd(V128_BITSELECT),
    ...store(0),
  ]);
const REDUCERS_INTO: Record<ReduceKernelName, number[]> = {
  sumFloat: lanewiseInto(F32X4_ADD),
  maxFloat: selectingInto(F32X4_GE),
  minFloat: selectingInto(F32X4_LE),
  sumInt: lanewiseInto(I32X4_ADD),
  maxInt: lanewiseInto(I32X4_MAX_S),
  minInt: lanewiseInto(I32X4_MIN_S),
};

function assemble(): Uint8Array {
  const bodies = [...NAMES.map((name) => REDUCERS[name]), ...NAMES.map((name) => REDUCERS_BOTH[name])];
  const reducerBodies = bodies.map((body) => functionBody([2, 1, I32, 2, V128], body));
  const divide = functionBody([1, 1, I32], divideBody);
  const intoBodies = NAMES.map((name) => functionBody([2, 1, I32, 2, V128], REDUCERS_INTO[name]));
  const names = [
    ...NAMES,
    ...NAMES.map((name) => `${name}Both`),
    'divide',
    ...NAMES.map((name) => `${name}Into`),
  ];
  const exports = names.flatMap((name, index) => [...text(name), 0x00, index]);
  const functions = bodies.length + 1 + intoBodies.length;
  return wasmModule([
    [1, [3, 0x60, 3, I32, I32, I32, 0, 0x60, 3, I32, I32, F32, 0, 0x60, 4, I32, I32, I32, I32, 0]],
    [2, sharedMemoryImport(ARENA_MAX_PAGES)],
    [3, [functions, ...bodies.map(() => 0), 1, ...intoBodies.map(() => 2)]],
    [7, [names.length, ...exports]],
    [10, [functions, ...reducerBodies.flat(), ...divide, ...intoBodies.flat()]],
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
    reduceInto: Object.fromEntries(
      NAMES.map((name) => [name, exported[`${name}Into`]]),
    ) as InPlaceKernels['reduceInto'],
  };
  return instance.kernels;
}
