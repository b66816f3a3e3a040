/**
 * WebAssembly SIMD reduction kernels for the shm backend, assembled here from named opcodes like
 * bfloat16-simd.ts (no toolchain, no fetched binary). A plain JavaScript loop `a[i] + b[i]` over
 * float32 arrays runs at ~0.3 G elements/s on this project's machines, i.e. ~2.6 GB/s of input,
 * well below what the shm backend must move; these kernels reduce 4 lanes per instruction inside
 * a cache-resident block, so a reduction costs about the copies into and out of that block.
 *
 * [Note: reduce simd layout] One module instance per thread, two 256 KiB regions of its
 * memory: ACCUMULATOR and INPUT (64 Ki float32 or int32 each; both fit in a 1 MiB L2, and
 * larger blocks measured ~20% less CPU than 16 Ki ones, fewer calls per op), each followed by
 * PLACEMENT_ROOM bytes of room. `kernel(count, shift)` computes
 * ACCUMULATOR[i] = ACCUMULATOR[i] (op) INPUT[i] for i < count rounded up to a multiple of 4 (the
 * extra lanes stay inside the regions), both regions moved by `shift` bytes (0 when left out;
 * see [Note: scratch placement]); `divide(count, divisor, shift)` divides ACCUMULATOR by divisor.
 * `at(shift)` gives the views there. The memory never grows, so the JavaScript views over it
 * stay valid.
 * Every kernel computes exactly what the scalar code in reduce-kernels.ts computes: a float32
 * sum or quotient of two float32 values, computed in float64 and rounded once, equals the float32
 * operation (53 >= 2 * 24 + 2 bits, so the double rounding is innocuous); max and min select
 * like `a >= b || isNaN(a) ? a : b`, keeping the accumulator's -0 and NaN as the scalar code does.
 * Only a NaN's payload bits may differ from the scalar code's (a NaN stays a NaN); every rank
 * still gets the same bits, because one rank computes each element and writes it to all.
 */

import {
  constant,
  F32,
  functionBody,
  get,
  I32,
  increment,
  instantiate,
  load,
  loopWhileBelow,
  name,
  simd,
  store,
  unsignedLeb,
  V128,
  wasmModule,
} from '../wasm/wasm-encoding';
import { F32X4_DIV, F32X4_SPLAT, I32_ADD, I32_SHL, LOCAL_SET, LOCAL_TEE } from '../wasm/wasm-opcodes';
import { PLACEMENT_ROOM } from './scratch-placement';
import { combine, placedViews, REDUCE_KERNEL_NAMES, type ReduceKernelName } from './simd-fragments';

/** Elements per kernel call: 256 KiB of float32 or int32. */
export const REDUCE_BLOCK = 65_536;
/** Off page boundaries (page offsets 1088 and 2176), like bfloat16-simd.ts. */
const ACCUMULATOR = 1_088;
const INPUT = ACCUMULATOR + REDUCE_BLOCK * 4 + PLACEMENT_ROOM + 1_088;
/** 64 KiB pages: both regions, their offsets and room. */
const PAGES = Math.ceil((INPUT + REDUCE_BLOCK * 4 + PLACEMENT_ROOM) / 65_536);
/** The regions' bases (byte offsets in the module's memory), for placementShift. */
export const REDUCE_REGIONS = { accumulator: ACCUMULATOR, input: INPUT } as const;

export type { ReduceKernelName };

/** Views over the regions moved by one shift. */
export interface ReduceViews {
  readonly accumulatorFloats: Float32Array;
  readonly accumulatorInts: Int32Array;
  readonly inputFloats: Float32Array;
  readonly inputInts: Int32Array;
}

export interface ReduceKernels extends ReduceViews {
  /** ACCUMULATOR (op)= INPUT, see [Note: reduce simd layout]. */
  readonly reduce: Record<ReduceKernelName, (count: number, shift?: number) => void>;
  /** ACCUMULATOR[i] /= divisor (float32). */
  divide(count: number, divisor: number, shift?: number): void;
  /** The views over the regions moved by `shift` (a multiple of PLACEMENT_STEP below PLACEMENT_ROOM). */
  at(shift: number): ReduceViews;
}

// Parameters: 0 = count in elements; reducers: 1 = shift; divide: 1 = divisor (f32), 2 = shift.
// Then locals: byte index, byte end, and two v128 scratch values.
const COUNT = 0;

/**
 * `for (byte = shift; byte < shift + count * 4; byte += 16) body(byte local)`, with the shift in
 * local `shift` and the loop's locals from `first`.
 */
function loopOverVectors(shift: number, first: number, body: (byte: number) => number[]): number[] {
  const byte = first;
  const end = first + 1;
  return [
    ...get(shift),
    LOCAL_SET,
    byte,
    ...get(COUNT),
    ...constant(2),
    I32_SHL,
    ...get(shift),
    I32_ADD,
    LOCAL_SET,
    end,
    ...loopWhileBelow(byte, end, [...body(byte), ...increment(byte, 16)]),
  ];
}

/** ACCUMULATOR = ACCUMULATOR (op) INPUT; max and min select through the v128 locals 4 and 5. */
const reducer = (reduction: ReduceKernelName) =>
  loopOverVectors(1, 2, (byte) => [
    ...get(byte),
    ...combine(
      reduction,
      [...get(byte), ...load(ACCUMULATOR)],
      [...get(byte), ...load(INPUT)],
      4,
      5,
      LOCAL_TEE,
    ),
    ...store(ACCUMULATOR),
  ]);

/** ACCUMULATOR /= splat(divisor); parameter 1 is the divisor, 2 the shift. */
const divideBody = loopOverVectors(2, 3, (byte) => [
  ...get(byte),
  ...get(byte),
  ...load(ACCUMULATOR),
  ...get(1),
  ...simd(F32X4_SPLAT),
  ...simd(F32X4_DIV),
  ...store(ACCUMULATOR),
]);

const NAMES = REDUCE_KERNEL_NAMES;
const REDUCERS = Object.fromEntries(NAMES.map((name) => [name, reducer(name)])) as Record<
  ReduceKernelName,
  number[]
>;

function assemble(): Uint8Array {
  // Reducers: (count, shift) with locals byte, end (i32) and a, b (v128); divide: (count, divisor, shift).
  const reducerBodies = NAMES.map((name) => functionBody([2, 2, I32, 2, V128], REDUCERS[name]));
  const divide = functionBody([1, 2, I32], divideBody);
  const exports = [
    ...name('memory'),
    0x02,
    0,
    ...NAMES.flatMap((kernel, index) => [...name(kernel), 0x00, index]),
    ...name('divide'),
    0x00,
    NAMES.length,
  ];
  return wasmModule([
    [1, [2, 0x60, 2, I32, I32, 0, 0x60, 3, I32, F32, I32, 0]],
    [3, [NAMES.length + 1, ...NAMES.map(() => 0), 1]],
    [5, [1, 0x00, ...unsignedLeb(PAGES)]],
    [7, [NAMES.length + 2, ...exports]],
    [10, [NAMES.length + 1, ...reducerBodies.flat(), ...divide]],
  ]);
}

let kernels: ReduceKernels | null | undefined;

/** This thread's kernels, or null where WebAssembly SIMD is unavailable (callers use scalar loops). */
export function reduceKernels(): ReduceKernels | null {
  if (kernels !== undefined) return kernels;
  kernels = null;
  const exported = instantiate(assemble());
  if (exported === null) return kernels;
  const memory = (exported.memory as { buffer: ArrayBuffer }).buffer;
  const views = (shift: number): ReduceViews => ({
    accumulatorFloats: new Float32Array(memory, ACCUMULATOR + shift, REDUCE_BLOCK),
    accumulatorInts: new Int32Array(memory, ACCUMULATOR + shift, REDUCE_BLOCK),
    inputFloats: new Float32Array(memory, INPUT + shift, REDUCE_BLOCK),
    inputInts: new Int32Array(memory, INPUT + shift, REDUCE_BLOCK),
  });
  const placed = placedViews('reduce kernels', views);
  kernels = {
    ...placed.first,
    at: placed.at,
    reduce: Object.fromEntries(
      NAMES.map((name) => [name, exported[name] as (count: number, shift?: number) => void]),
    ) as Record<ReduceKernelName, (count: number, shift?: number) => void>,
    divide: exported.divide as (count: number, divisor: number, shift?: number) => void,
  };
  return kernels;
}
