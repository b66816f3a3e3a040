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
  END,
  functionBody,
  get,
  I32,
  load,
  signed,
  simd,
  store,
  text,
  unsigned,
  V128,
  wasmModule,
} from '../wasm-assembly.js';
import { ARENA_MAX_PAGES, type SharedMemory } from './shm-arena.js';

export interface InPlaceBfloat16Kernels {
  decode(floats: number, halves: number, count: number): void;
  decodeAdd(floats: number, halves: number, count: number): void;
  encode(halves: number, floats: number, count: number): void;
}

const BLOCK = 0x02;
const LOOP = 0x03;
const BR = 0x0c;
const BR_IF = 0x0d;
const LOCAL_SET = 0x21;
const I32_CONST = 0x41;
const I32_GE_U = 0x4f;
const I32_ADD = 0x6a;
const I32X4_SPLAT = 0x11;
const I32X4_GT_S = 0x3b;
const V128_AND = 0x4e;
const V128_OR = 0x50;
const V128_BITSELECT = 0x52;
const I16X8_NARROW_I32X4_U = 0x86;
const I32X4_EXTEND_LOW_I16X8_U = 0xa9;
const I32X4_EXTEND_HIGH_I16X8_U = 0xaa;
const I32X4_SHL = 0xab;
const I32X4_SHR_U = 0xad;
const I32X4_ADD = 0xae;
const F32X4_ADD = 0xe4;

// Parameters: 0 = first address, 1 = second address, 2 = count; locals 3 = end (i32),
// 4, 5 = v128 scratch.
const FIRST = 0;
const SECOND = 1;
const COUNT = 2;
const END_LOCAL = 3;
const X = 4;
const Y = 5;

const constant = (value: number): number[] => [I32_CONST, ...signed(value)];
const splat = (value: number): number[] => [...constant(value), ...simd(I32X4_SPLAT)];
const advance = (local: number, bytes: number) => [
  ...get(local),
  ...constant(bytes),
  I32_ADD,
  LOCAL_SET,
  local,
];

/** `end = first + count * firstBytes; while (first < end) { body; first += 8 elements; second += 8 elements }` */
function loopOverEights(firstBytes: number, secondBytes: number, body: number[]): number[] {
  return [
    ...get(FIRST),
    ...get(COUNT),
    ...constant(Math.log2(firstBytes)),
    0x74, // i32.shl
    I32_ADD,
    LOCAL_SET,
    END_LOCAL,
    BLOCK,
    0x40,
    LOOP,
    0x40,
    ...get(FIRST),
    ...get(END_LOCAL),
    I32_GE_U,
    BR_IF,
    1,
    ...body,
    ...advance(FIRST, 8 * firstBytes),
    ...advance(SECOND, 8 * secondBytes),
    BR,
    0,
    END,
    END,
  ];
}

/** The float32 bits of the 4 bfloat16 on the stack's low or high half (as i32x4). */
const widen = (extend: number): number[] => [...simd(extend), ...constant(16), ...simd(I32X4_SHL)];

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
    ...widen(I32X4_EXTEND_LOW_I16X8_U),
    ...(add ? simd(F32X4_ADD) : []),
    ...store(0),
    ...get(FIRST),
    ...(add ? [...get(FIRST), ...load(16)] : []),
    ...get(X),
    ...widen(I32X4_EXTEND_HIGH_I16X8_U),
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
    [2, [1, ...text('env'), ...text('memory'), 0x02, 0x03, 1, ...unsigned(ARENA_MAX_PAGES)]],
    [3, [3, 0, 0, 0]],
    [7, [3, ...names.flatMap((name, index) => [...text(name), 0x00, index])]],
    [10, [3, ...bodies.flat()]],
  ]);
}

interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> };
}

let instance: { memory: SharedMemory; kernels: InPlaceBfloat16Kernels | null } | undefined;

/** This thread's bfloat16 kernels over `memory`, or null where WebAssembly SIMD is unavailable. */
export function inPlaceBfloat16Kernels(memory: SharedMemory): InPlaceBfloat16Kernels | null {
  if (instance !== undefined && instance.memory === memory) return instance.kernels;
  instance = { memory, kernels: null };
  const wasm = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
  const bytes = assemble();
  if (wasm === undefined || !wasm.validate(bytes)) return null;
  const exported = new wasm.Instance(new wasm.Module(bytes), { env: { memory } }).exports;
  instance.kernels = {
    decode: exported.decode as InPlaceBfloat16Kernels['decode'],
    decodeAdd: exported.decodeAdd as InPlaceBfloat16Kernels['decodeAdd'],
    encode: exported.encode as InPlaceBfloat16Kernels['encode'],
  };
  return instance.kernels;
}
