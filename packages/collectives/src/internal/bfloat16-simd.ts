/**
 * WebAssembly SIMD kernels for bfloat16 conversion, assembled here from named opcodes (no
 * toolchain, no fetched binary). Plain JavaScript loops over typed arrays run at 0.4–0.5 G
 * elements/s on this project's machines; these kernels convert 8 elements per loop pass (encode
 * and round on 16-bit lanes, see [Note: bfloat16 rounding in 16-bit lanes]) and are bounded by
 * the copies into and out of their block of wasm memory.
 *
 * [Note: bfloat16 simd layout] One module instance per thread, two fixed 64 KiB regions of its
 * memory: INPUT near byte 0 and OUTPUT near byte 65536; the rounding's constants sit below INPUT. A kernel call converts `count` elements
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
/** bfloat16 bits addRound writes besides its floats (32 KiB). */
const ENCODED = 131_072 + 3_264;

export interface Bfloat16Kernels {
  /** float32 bits in INPUT (as Int32Array) -> bfloat16 bits in OUTPUT (Uint16Array). */
  encode(count: number): void;
  /** bfloat16 bits in INPUT -> float32 in OUTPUT. */
  decode(count: number): void;
  /** float32 in INPUT -> float32 rounded to bfloat16 in OUTPUT. */
  round(count: number): void;
  /** float32 in OUTPUT += bfloat16 in INPUT, decoded. */
  decodeAdd(count: number): void;
  /**
   * float32 in OUTPUT += bfloat16 in INPUT, decoded, then rounded to bfloat16 (the last reduce
   * step of a sum that ends in bfloat16): the rounded floats stay in OUTPUT and their bfloat16
   * bits go to ENCODED (encodedHalves), ready to send.
   */
  addRound(count: number): void;
  /** float32 in INPUT -> rounded to bfloat16: floats in OUTPUT, bfloat16 bits in ENCODED. */
  encodeRound(count: number): void;
  readonly encodedHalves: Uint16Array;
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
const I8X16_SHUFFLE = 0x0d;
const I16X8_EQ = 0x2d;
const I16X8_GT_S = 0x31;
const V128_AND = 0x4e;
const V128_OR = 0x50;
const V128_XOR = 0x51;
const V128_BITSELECT = 0x52;
const I16X8_ADD_SAT_S = 0x8f;
const I16X8_SUB = 0x91;
const I32X4_EXTEND_LOW_I16X8_U = 0xa9;
const I32X4_EXTEND_HIGH_I16X8_U = 0xaa;
const I32X4_SHL = 0xab;
const F32X4_ADD = 0xe4;

const constant = (value: number): number[] => [I32_CONST, ...signed(value)];

// Locals: 0 = count (parameter), 1 = index, 2.. = v128 scratch.
const COUNT = 0;
const INDEX = 1;
const FIRST = 2;
const SECOND = 3;
const HIGH = 4;
const LOW = 5;
const RESULT = 6;
const SCRATCH_LOCALS = 5;

/**
 * 16-bit lane constants the rounding uses, stored below INPUT at instantiation and loaded in the
 * loop: TurboFan does not hoist a v128.const (or a local holding one) out of a loop, it
 * rematerialises it with three instructions per use; a load is one.
 */
const CONSTANTS = [1, 0x8000, 0x7fff, 0x7f7f, 0x0040] as const;
const constantLoad = (value: (typeof CONSTANTS)[number]): number[] => [
  ...constant(0),
  ...load(16 * CONSTANTS.indexOf(value)),
];
const ZERO = [...simd(V128_CONST), ...new Array<number>(16).fill(0)];

/** i8x16.shuffle of the two v128 on the stack by `lanes` (16 byte indices into first ++ second). */
const shuffle = (lanes: number[]): number[] => [...simd(I8X16_SHUFFLE), ...lanes];
/** The upper and lower 16 bits of eight 32-bit lanes (two vectors), as eight 16-bit lanes. */
const UPPER_HALVES = [2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31];
const LOWER_HALVES = [0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29];
/** Zero lower halves under the first (then the last) four 16-bit lanes of the second vector. */
const ZIP_LOW = [0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23];
const ZIP_HIGH = [8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31];

/** Byte address of element INDEX for `elementBytes`-wide elements (an i32 on the stack). */
const address = (elementBytes: number): number[] => [
  ...get(INDEX),
  ...constant(Math.log2(elementBytes)),
  I32_SHL,
];

/**
 * [Note: bfloat16 rounding in 16-bit lanes] Eight float32 (FIRST, SECOND) rounded to bfloat16,
 * into RESULT, computed on their upper halves H and lower halves L as eight 16-bit lanes (half
 * the work of 32-bit lanes). [Note: bfloat16 bits] adds 0x7fff plus H's lowest bit to the float:
 * that carries into H exactly when L + (H & 1) > 0x8000, that is when (L ^ 0x8000) + (H & 1) > 0
 * as signed 16-bit numbers (a saturating add keeps 0x7fff + 1 positive), so the rounded value is
 * H minus that comparison's all-ones mask. A float is NaN when |bits| > 0x7f800000, that is
 * (H & 0x7fff) > 0x7f80 when L = 0 and >= 0x7f80 otherwise: the threshold is 0x7f7f minus the
 * all-ones mask of L = 0, and both sides are non-negative, so a signed comparison serves. NaN
 * becomes H | 0x40. (x64 has signed 16-bit comparisons only: an unsigned one costs three
 * instructions.)
 */
const roundToResult: number[] = [
  ...get(FIRST),
  ...get(SECOND),
  ...shuffle(UPPER_HALVES),
  LOCAL_SET,
  HIGH,
  ...get(FIRST),
  ...get(SECOND),
  ...shuffle(LOWER_HALVES),
  ...constantLoad(0x8000),
  ...simd(V128_XOR),
  LOCAL_SET,
  LOW,
  // NaN value, rounded value, NaN mask: bitselect.
  ...get(HIGH),
  ...constantLoad(0x0040),
  ...simd(V128_OR),
  ...get(HIGH),
  ...get(LOW),
  ...get(HIGH),
  ...constantLoad(1),
  ...simd(V128_AND),
  ...simd(I16X8_ADD_SAT_S),
  ...ZERO,
  ...simd(I16X8_GT_S),
  ...simd(I16X8_SUB),
  ...get(HIGH),
  ...constantLoad(0x7fff),
  ...simd(V128_AND),
  ...constantLoad(0x7f7f),
  ...get(LOW),
  ...constantLoad(0x8000),
  ...simd(I16X8_EQ),
  ...simd(I16X8_SUB),
  ...simd(I16X8_GT_S),
  ...simd(V128_BITSELECT),
  LOCAL_SET,
  RESULT,
];

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

/** FIRST and SECOND = the eight float32 at element INDEX of INPUT. */
const loadEight: number[] = [
  ...address(4),
  ...load(INPUT),
  LOCAL_SET,
  FIRST,
  ...address(4),
  ...load(INPUT + 16),
  LOCAL_SET,
  SECOND,
];

const encodeBody = loopOverEights([
  ...loadEight,
  ...roundToResult,
  ...address(2),
  ...get(RESULT),
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

const roundBody = loopOverEights([
  ...loadEight,
  ...roundToResult,
  ...address(4),
  ...ZERO,
  ...get(RESULT),
  ...shuffle(ZIP_LOW),
  ...store(OUTPUT),
  ...address(4),
  ...ZERO,
  ...get(RESULT),
  ...shuffle(ZIP_HIGH),
  ...store(OUTPUT + 16),
]);

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

/** FIRST, SECOND = the float32 at OUTPUT + the decoded bfloat16 at INPUT; then round; store. */
const addRoundHalf = (local: number, extend: number, offset: number): number[] => [
  ...address(4),
  ...load(OUTPUT + offset),
  ...get(RESULT),
  ...simd(extend),
  ...constant(16),
  ...simd(I32X4_SHL),
  ...simd(F32X4_ADD),
  LOCAL_SET,
  local,
];
const addRoundBody = loopOverEights([
  ...address(2),
  ...load(INPUT),
  LOCAL_SET,
  RESULT,
  ...addRoundHalf(FIRST, I32X4_EXTEND_LOW_I16X8_U, 0),
  ...addRoundHalf(SECOND, I32X4_EXTEND_HIGH_I16X8_U, 16),
  ...roundToResult,
  ...address(2),
  ...get(RESULT),
  ...store(ENCODED),
  ...address(4),
  ...ZERO,
  ...get(RESULT),
  ...shuffle(ZIP_LOW),
  ...store(OUTPUT),
  ...address(4),
  ...ZERO,
  ...get(RESULT),
  ...shuffle(ZIP_HIGH),
  ...store(OUTPUT + 16),
]);

const encodeRoundBody = loopOverEights([
  ...loadEight,
  ...roundToResult,
  ...address(2),
  ...get(RESULT),
  ...store(ENCODED),
  ...address(4),
  ...ZERO,
  ...get(RESULT),
  ...shuffle(ZIP_LOW),
  ...store(OUTPUT),
  ...address(4),
  ...ZERO,
  ...get(RESULT),
  ...shuffle(ZIP_HIGH),
  ...store(OUTPUT + 16),
]);

const KERNELS = ['encode', 'decode', 'round', 'decodeAdd', 'addRound', 'encodeRound'] as const;
const BODIES = [encodeBody, decodeBody, roundBody, decodeAddBody, addRoundBody, encodeRoundBody];

function assemble(): Uint8Array {
  const locals = [2, 1, I32, SCRATCH_LOCALS, V128];
  const bodies = BODIES.map((body) => functionBody(locals, body));
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
  const constants = new Uint16Array(memory, 0, 8 * CONSTANTS.length);
  for (const [index, value] of CONSTANTS.entries()) constants.fill(value, 8 * index, 8 * index + 8);
  const kernel = (name: string) => exported[name] as (count: number) => void;
  kernels = {
    encode: kernel('encode'),
    decode: kernel('decode'),
    round: kernel('round'),
    decodeAdd: kernel('decodeAdd'),
    addRound: kernel('addRound'),
    encodeRound: kernel('encodeRound'),
    encodedHalves: new Uint16Array(memory, ENCODED, SIMD_BLOCK),
    inputFloats: new Float32Array(memory, INPUT, SIMD_BLOCK),
    inputHalves: new Uint16Array(memory, INPUT, SIMD_BLOCK),
    outputFloats: new Float32Array(memory, OUTPUT, SIMD_BLOCK),
    outputHalves: new Uint16Array(memory, OUTPUT, SIMD_BLOCK),
  };
  return kernels;
}
