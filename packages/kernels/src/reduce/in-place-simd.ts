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
  name,
  sharedMemoryImport,
  simd,
  store,
  V128,
  wasmModule,
} from '../wasm/wasm-encoding';
import { F32X4_DIV, F32X4_SPLAT, I32_ADD, LOCAL_SET, LOCAL_TEE } from '../wasm/wasm-opcodes';
import { combine, REDUCE_KERNEL_NAMES, REDUCTIONS, type ReduceKernelName } from './simd-fragments';

/** A shared WebAssembly memory the in-place kernels import (the thread ranks' arena). */
export interface SharedWasmMemory {
  readonly buffer: SharedArrayBuffer;
}

/** The maximum the kernels' memory import declares: a 32-bit memory's 4 GiB, so any arena fits. */
export const IMPORTED_MEMORY_PAGES = 65_536;

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

/** accumulator (op)= source, max and min selecting through A and B. */
const reducer = (reduction: ReduceKernelName, both: boolean) =>
  loopOverVectors(2, 3, true, [
    ...get(ACCUMULATOR),
    ...combine(reduction, [...get(ACCUMULATOR), ...load(0)], [...get(SOURCE), ...load(0)], A, B, LOCAL_TEE),
    ...alsoIntoSource(both, 'lanewise' in REDUCTIONS[reduction] ? A : B),
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

const NAMES = REDUCE_KERNEL_NAMES;
const reducers = (both: boolean) =>
  Object.fromEntries(NAMES.map((name) => [name, reducer(name, both)])) as Record<ReduceKernelName, number[]>;
const REDUCERS = reducers(false);
const REDUCERS_BOTH = reducers(true);

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
const reducerInto = (reduction: ReduceKernelName) =>
  intoTarget([
    ...get(TARGET),
    ...combine(
      reduction,
      [...get(ACCUMULATOR), ...load(0)],
      [...get(SOURCE), ...load(0)],
      INTO_A,
      INTO_B,
      LOCAL_TEE,
    ),
    ...store(0),
  ]);
const REDUCERS_INTO = Object.fromEntries(NAMES.map((name) => [name, reducerInto(name)])) as Record<
  ReduceKernelName,
  number[]
>;

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
  const exports = names.flatMap((kernel, index) => [...name(kernel), 0x00, index]);
  const functions = bodies.length + 1 + intoBodies.length;
  return wasmModule([
    [1, [3, 0x60, 3, I32, I32, I32, 0, 0x60, 3, I32, I32, F32, 0, 0x60, 4, I32, I32, I32, I32, 0]],
    [2, sharedMemoryImport(IMPORTED_MEMORY_PAGES)],
    [3, [functions, ...bodies.map(() => 0), 1, ...intoBodies.map(() => 2)]],
    [7, [names.length, ...exports]],
    [10, [functions, ...reducerBodies.flat(), ...divide, ...intoBodies.flat()]],
  ]);
}

let instance: { memory: SharedWasmMemory; kernels: InPlaceKernels | null } | undefined;

/**
 * This thread's kernels over `memory` (one arena per thread: the rank threads of one
 * spawnThreadRanks), or null where WebAssembly SIMD or shared memory is unavailable.
 */
export function inPlaceKernels(memory: SharedWasmMemory): InPlaceKernels | null {
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
