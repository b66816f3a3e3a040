/**
 * bfloat16 kernels over the thread ranks' arena ([Note: shm arena]), for sums and averages of
 * bfloat16 buffers in place: addresses are byte offsets into the arena.
 *
 * [Note: in-place bfloat16] `decode(floats, halves, count)` writes the float32 value of `count`
 * bfloat16 (a multiple of 8) at `halves` into `floats`; `decodeAdd` adds them to `floats`
 * instead; `encode(halves, floats, count)` rounds `count` float32 to bfloat16 exactly as
 * [Note: bfloat16 bits] does: (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16, and a NaN
 * (|bits| > 0x7f800000) becomes (bits >>> 16) | 0x40. The float32 lanes live in a per-thread
 * scratch block of the arena; the sum is the float32 sum in rank order, so the results equal
 * reduceBlocks' bit for bit (tested over all 2^16 patterns).
 */

import {
  constant,
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
import {
  F32X4_ADD,
  I16X8_NARROW_I32X4_U,
  I32_ADD,
  I32_SHL,
  I32X4_ADD,
  I32X4_GT_S,
  I32X4_SHR_U,
  I32X4_SPLAT,
  LOCAL_SET,
  V128_AND,
  V128_BITSELECT,
  V128_OR,
} from '../wasm/wasm-opcodes';
import { IMPORTED_MEMORY_PAGES, type SharedWasmMemory } from './in-place-simd';
import { widenBfloat16High, widenBfloat16Low } from './simd-fragments';

export interface InPlaceBfloat16Kernels {
  decode(floats: number, halves: number, count: number): void;
  decodeAdd(floats: number, halves: number, count: number): void;
  encode(halves: number, floats: number, count: number): void;
}

// Parameters: 0 = first address, 1 = second address, 2 = count; locals 3 = end (i32),
// 4, 5 = v128 scratch.
const FIRST = 0;
const SECOND = 1;
const COUNT = 2;
const END_LOCAL = 3;
const X = 4;
const Y = 5;

const splat = (value: number): number[] => [...constant(value), ...simd(I32X4_SPLAT)];

/** `end = first + count * firstBytes; while (first < end) { body; first += 8 elements; second += 8 elements }` */
function loopOverEights(firstBytes: number, secondBytes: number, body: number[]): number[] {
  return [
    ...get(FIRST),
    ...get(COUNT),
    ...constant(Math.log2(firstBytes)),
    I32_SHL,
    I32_ADD,
    LOCAL_SET,
    END_LOCAL,
    ...loopWhileBelow(FIRST, END_LOCAL, [
      ...body,
      ...increment(FIRST, 8 * firstBytes),
      ...increment(SECOND, 8 * secondBytes),
    ]),
  ];
}

/** decode (add = false) or decodeAdd: floats at FIRST, halves at SECOND. */
const decodeBody = (add: boolean): number[] =>
  loopOverEights(4, 2, [
    ...get(SECOND),
    ...load(0),
    LOCAL_SET,
    X,
    ...get(FIRST),
    ...(add ? [...get(FIRST), ...load(0)] : []),
    ...get(X),
    ...widenBfloat16Low(),
    ...(add ? simd(F32X4_ADD) : []),
    ...store(0),
    ...get(FIRST),
    ...(add ? [...get(FIRST), ...load(16)] : []),
    ...get(X),
    ...widenBfloat16High(),
    ...(add ? simd(F32X4_ADD) : []),
    ...store(16),
  ]);

/** The bfloat16 bits (in 32-bit lanes) of the float32 bits in local `bits`, see the Note. */
const round = (bits: number): number[] => [
  // NaN value
  ...get(bits),
  ...constant(16),
  ...simd(I32X4_SHR_U),
  ...splat(0x40),
  ...simd(V128_OR),
  // rounded value
  ...get(bits),
  ...splat(0x7fff),
  ...simd(I32X4_ADD),
  ...get(bits),
  ...constant(16),
  ...simd(I32X4_SHR_U),
  ...splat(1),
  ...simd(V128_AND),
  ...simd(I32X4_ADD),
  ...constant(16),
  ...simd(I32X4_SHR_U),
  // NaN mask
  ...get(bits),
  ...splat(0x7fffffff),
  ...simd(V128_AND),
  ...splat(0x7f800000),
  ...simd(I32X4_GT_S),
  ...simd(V128_BITSELECT),
];

/** encode: halves at FIRST, floats at SECOND. */
const encodeBody = loopOverEights(2, 4, [
  ...get(FIRST),
  ...get(SECOND),
  ...load(0),
  LOCAL_SET,
  X,
  ...get(SECOND),
  ...load(16),
  LOCAL_SET,
  Y,
  ...round(X),
  ...round(Y),
  ...simd(I16X8_NARROW_I32X4_U),
  ...store(0),
]);

function assemble(): Uint8Array {
  const bodies = [decodeBody(false), decodeBody(true), encodeBody].map((body) =>
    functionBody([2, 1, I32, 2, V128], body),
  );
  const names = ['decode', 'decodeAdd', 'encode'];
  return wasmModule([
    [1, [1, 0x60, 3, I32, I32, I32, 0]],
    [2, sharedMemoryImport(IMPORTED_MEMORY_PAGES)],
    [3, [3, 0, 0, 0]],
    [7, [3, ...names.flatMap((kernel, index) => [...name(kernel), 0x00, index])]],
    [10, [3, ...bodies.flat()]],
  ]);
}

let instance: { memory: SharedWasmMemory; kernels: InPlaceBfloat16Kernels | null } | undefined;

/** This thread's bfloat16 kernels over `memory`, or null where WebAssembly SIMD is unavailable. */
export function inPlaceBfloat16Kernels(memory: SharedWasmMemory): InPlaceBfloat16Kernels | null {
  if (instance !== undefined && instance.memory === memory) return instance.kernels;
  instance = { memory, kernels: null };
  const exported = instantiate(assemble(), { env: { memory } });
  if (exported === null) return null;
  instance.kernels = {
    decode: exported.decode as InPlaceBfloat16Kernels['decode'],
    decodeAdd: exported.decodeAdd as InPlaceBfloat16Kernels['decodeAdd'],
    encode: exported.encode as InPlaceBfloat16Kernels['encode'],
  };
  return instance.kernels;
}
