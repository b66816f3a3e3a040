/**
 * WebAssembly SIMD kernels for bfloat16 conversion, assembled here from named opcodes (no
 * toolchain, no fetched binary). Plain JavaScript loops over typed arrays run at 0.4–0.5 G
 * elements/s on this project's machines; these kernels convert 8 elements per instruction and
 * are bounded by the copies into and out of their block of wasm memory.
 *
 * [Note: bfloat16 simd layout] One module instance per thread, two fixed 64 KiB regions of its
 * memory: INPUT at byte 0 and OUTPUT at byte 65536. A kernel call converts `count` elements
 * (rounded up to a multiple of 8; the extra lanes read and write only inside the regions) from
 * INPUT to OUTPUT. The memory never grows, so the JavaScript views over it stay valid.
 * Every kernel computes exactly what the scalar code in bfloat16.ts computes
 * ([Note: bfloat16 bits]); the tests compare both over all 2^16 bfloat16 patterns and random
 * float32 bits, NaN and infinities included.
 */

import {
  END,
  functionBody,
  get,
  I32,
  instantiate,
  load,
  signed,
  simd,
  store,
  text,
  V128,
  wasmModule,
} from './wasm-assembly.js';

/** Elements per kernel call: 64 KiB of float32. */
export const SIMD_BLOCK = 16_384;
/** Off page boundaries: see [Note: bfloat16 simd layout]. */
const INPUT = 1_088;
const OUTPUT = 65_536 + 2_176;

export interface Bfloat16Kernels {
  /** float32 bits in INPUT (as Int32Array) -> bfloat16 bits in OUTPUT (Uint16Array). */
  encode(count: number): void;
  /** bfloat16 bits in INPUT -> float32 in OUTPUT. */
  decode(count: number): void;
  /** float32 in INPUT -> float32 rounded to bfloat16 in OUTPUT. */
  round(count: number): void;
  /** float32 in OUTPUT += bfloat16 in INPUT, decoded. */
  decodeAdd(count: number): void;
  readonly inputFloats: Float32Array;
  readonly inputHalves: Uint16Array;
  readonly outputFloats: Float32Array;
  readonly outputHalves: Uint16Array;
}

// Opcodes (WebAssembly core 2.0 with fixed-width SIMD).
const BLOCK = 0x02;
const LOOP = 0x03;
const BR = 0x0c;
const BR_IF = 0x0d;
const LOCAL_SET = 0x21;
const I32_CONST = 0x41;
const I32_GE_U = 0x4f;
const I32_ADD = 0x6a;
const I32_SHL = 0x74;
const V128_CONST = 0x0c;
const I32X4_GT_U = 0x3c;
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

const constant = (value: number): number[] => [I32_CONST, ...signed(value)];
function splat(value: number): number[] {
  const lane = [value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, (value >>> 24) & 0xff];
  return [...simd(V128_CONST), ...lane, ...lane, ...lane, ...lane];
}

// Locals: 0 = count (parameter), 1 = index, 2 and 3 = v128 scratch, 4.. = v128 constants.
const COUNT = 0;
const INDEX = 1;
const FIRST = 2;
const SECOND = 3;
/** Constants the rounding uses, held in locals so the loop does not rematerialise them. */
const CONSTANTS = [0x00400000, 0x7fff, 1, 0x7fffffff, 0x7f800000, 0xffff0000 | 0];
const constantLocal = (value: number): number[] => get(4 + CONSTANTS.indexOf(value));
const prologue = CONSTANTS.flatMap((value, index) => [...splat(value), LOCAL_SET, 4 + index]);

/** Byte address of element INDEX for `elementBytes`-wide elements (an i32 on the stack). */
const address = (elementBytes: number): number[] => [
  ...get(INDEX),
  ...constant(Math.log2(elementBytes)),
  I32_SHL,
];

/** The rounded float32 bits of the i32x4 in `local` (see [Note: bfloat16 bits]), on the stack. */
function roundedBits(local: number): number[] {
  return [
    ...get(local),
    ...constantLocal(0x00400000),
    ...simd(V128_OR),
    ...get(local),
    ...constantLocal(0x7fff),
    ...simd(I32X4_ADD),
    ...get(local),
    ...constant(16),
    ...simd(I32X4_SHR_U),
    ...constantLocal(1),
    ...simd(V128_AND),
    ...simd(I32X4_ADD),
    ...get(local),
    ...constantLocal(0x7fffffff),
    ...simd(V128_AND),
    ...constantLocal(0x7f800000),
    ...simd(I32X4_GT_U),
    ...simd(V128_BITSELECT),
  ];
}

/** `for (index = 0; index < count; index += 8) body` */
function loopOverEights(body: number[]): number[] {
  return [
    BLOCK,
    0x40,
    LOOP,
    0x40,
    ...get(INDEX),
    ...get(COUNT),
    I32_GE_U,
    BR_IF,
    1,
    ...body,
    ...get(INDEX),
    ...constant(8),
    I32_ADD,
    LOCAL_SET,
    INDEX,
    BR,
    0,
    END,
    END,
  ];
}

const encodeBody = loopOverEights([
  ...address(2),
  ...address(4),
  ...load(INPUT),
  LOCAL_SET,
  FIRST,
  ...address(4),
  ...load(INPUT + 16),
  LOCAL_SET,
  SECOND,
  ...roundedBits(FIRST),
  ...constant(16),
  ...simd(I32X4_SHR_U),
  ...roundedBits(SECOND),
  ...constant(16),
  ...simd(I32X4_SHR_U),
  ...simd(I16X8_NARROW_I32X4_U),
  ...store(OUTPUT),
]);

const decodeBody = loopOverEights([
  ...address(2),
  ...load(INPUT),
  LOCAL_SET,
  FIRST,
  ...address(4),
  ...get(FIRST),
  ...simd(I32X4_EXTEND_LOW_I16X8_U),
  ...constant(16),
  ...simd(I32X4_SHL),
  ...store(OUTPUT),
  ...address(4),
  ...get(FIRST),
  ...simd(I32X4_EXTEND_HIGH_I16X8_U),
  ...constant(16),
  ...simd(I32X4_SHL),
  ...store(OUTPUT + 16),
]);

const roundHalf = (offset: number): number[] => [
  ...address(4),
  ...address(4),
  ...load(INPUT + offset),
  LOCAL_SET,
  FIRST,
  ...roundedBits(FIRST),
  ...constantLocal(0xffff0000 | 0),
  ...simd(V128_AND),
  ...store(OUTPUT + offset),
];
const roundBody = loopOverEights([...roundHalf(0), ...roundHalf(16)]);

const decodeAddHalf = (extend: number, offset: number): number[] => [
  ...address(4),
  ...address(4),
  ...load(OUTPUT + offset),
  ...get(FIRST),
  ...simd(extend),
  ...constant(16),
  ...simd(I32X4_SHL),
  ...simd(F32X4_ADD),
  ...store(OUTPUT + offset),
];
const decodeAddBody = loopOverEights([
  ...address(2),
  ...load(INPUT),
  LOCAL_SET,
  FIRST,
  ...decodeAddHalf(I32X4_EXTEND_LOW_I16X8_U, 0),
  ...decodeAddHalf(I32X4_EXTEND_HIGH_I16X8_U, 16),
]);

const KERNELS = ['encode', 'decode', 'round', 'decodeAdd'] as const;
const BODIES = [encodeBody, decodeBody, roundBody, decodeAddBody];

function assemble(): Uint8Array {
  const locals = [2, 1, I32, 2 + CONSTANTS.length, V128];
  const bodies = BODIES.map((body) => functionBody(locals, [...prologue, ...body]));
  const exports = [
    ...text('memory'),
    0x02,
    0,
    ...KERNELS.flatMap((name, index) => [...text(name), 0x00, index]),
  ];
  return wasmModule([
    [1, [1, 0x60, 1, I32, 0]],
    [3, [KERNELS.length, ...KERNELS.map(() => 0)]],
    [5, [1, 0x00, 3]],
    [7, [KERNELS.length + 1, ...exports]],
    [10, [KERNELS.length, ...bodies.flat()]],
  ]);
}

let kernels: Bfloat16Kernels | null | undefined;

/** This thread's kernels, or null where WebAssembly SIMD is unavailable (callers use scalar loops). */
export function bfloat16Kernels(): Bfloat16Kernels | null {
  if (kernels !== undefined) return kernels;
  kernels = null;
  const exported = instantiate(assemble());
  if (exported === null) return kernels;
  const memory = (exported.memory as { buffer: ArrayBuffer }).buffer;
  const kernel = (name: string) => exported[name] as (count: number) => void;
  kernels = {
    encode: kernel('encode'),
    decode: kernel('decode'),
    round: kernel('round'),
    decodeAdd: kernel('decodeAdd'),
    inputFloats: new Float32Array(memory, INPUT, SIMD_BLOCK),
    inputHalves: new Uint16Array(memory, INPUT, SIMD_BLOCK),
    outputFloats: new Float32Array(memory, OUTPUT, SIMD_BLOCK),
    outputHalves: new Uint16Array(memory, OUTPUT, SIMD_BLOCK),
  };
  return kernels;
}
