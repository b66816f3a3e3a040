/**
 * WebAssembly SIMD kernels for bfloat16 conversion, assembled here from named opcodes (no
 * toolchain, no fetched binary). Plain JavaScript loops over typed arrays run at 0.4–0.5 G
 * elements/s on this project's machines; these kernels convert 8 elements per loop pass (encode
 * and round on 16-bit lanes, see [Note: bfloat16 rounding in 16-bit lanes]) and are bounded by
 * the copies into and out of their block of wasm memory.
 *
 * [Note: bfloat16 simd layout] One module instance per thread, three regions of its memory:
 * INPUT and OUTPUT (64 KiB each) and ENCODED (32 KiB), each followed by PLACEMENT_ROOM bytes of
 * room and staggered by 1088 bytes within a page; the rounding's constants sit below INPUT. A
 * kernel call `kernel(count, shift)` converts `count` elements (rounded up to a multiple of 8;
 * the extra lanes read and write only inside the regions) from INPUT + shift to OUTPUT + shift
 * (and ENCODED + shift): callers move all regions off their arrays' page offsets
 * ([Note: scratch placement]); `at(shift)` gives the views there. The memory never grows, so the
 * JavaScript views over it stay valid.
 * Every kernel computes exactly what the scalar code in bfloat16.ts computes
 * ([Note: bfloat16 bits]); the tests compare both over all 2^16 bfloat16 patterns and random
 * float32 bits, NaN and infinities included.
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
  simd,
  store,
  V128,
  wasmModule,
} from '../wasm/wasm-encoding';
import {
  F32X4_ADD,
  I8X16_SHUFFLE,
  I16X8_ADD_SAT_S,
  I16X8_EQ,
  I16X8_GT_S,
  I16X8_SUB,
  I32_ADD,
  I32_SHL,
  LOCAL_SET,
  V128_AND,
  V128_BITSELECT,
  V128_CONST,
  V128_OR,
  V128_XOR,
} from '../wasm/wasm-opcodes';
import { PLACEMENT_ROOM } from './scratch-placement';
import { placedViews, widenBfloat16High, widenBfloat16Low } from './simd-fragments';

/** Elements per kernel call: 64 KiB of float32. */
export const SIMD_BLOCK = 16_384;
/** Region bases, at page offsets 1088, 2176 and 3264: see [Note: bfloat16 simd layout]. */
const INPUT = 1_088;
const OUTPUT = INPUT + SIMD_BLOCK * 4 + PLACEMENT_ROOM + 1_088;
/** bfloat16 bits addRound writes besides its floats (32 KiB). */
const ENCODED = OUTPUT + SIMD_BLOCK * 4 + PLACEMENT_ROOM + 1_088;
const PAGES = Math.ceil((ENCODED + SIMD_BLOCK * 2 + PLACEMENT_ROOM) / 65_536);
/** The regions' bases (byte offsets in the module's memory), for placementShift. */
export const BFLOAT16_REGIONS = { input: INPUT, output: OUTPUT, encoded: ENCODED } as const;

/** Views over the regions moved by one shift. */
export interface Bfloat16Views {
  readonly encodedHalves: Uint16Array;
  readonly inputFloats: Float32Array;
  readonly inputHalves: Uint16Array;
  readonly outputFloats: Float32Array;
  readonly outputHalves: Uint16Array;
}

/**
 * The kernels; each takes the regions' shift as its optional second argument (0 when left out,
 * the regions of the views below).
 */
export interface Bfloat16Kernels extends Bfloat16Views {
  /** float32 bits in INPUT (as Int32Array) -> bfloat16 bits in OUTPUT (Uint16Array). */
  encode(count: number, shift?: number): void;
  /** bfloat16 bits in INPUT -> float32 in OUTPUT. */
  decode(count: number, shift?: number): void;
  /** float32 in INPUT -> float32 rounded to bfloat16 in OUTPUT. */
  round(count: number, shift?: number): void;
  /** float32 in OUTPUT += bfloat16 in INPUT, decoded. */
  decodeAdd(count: number, shift?: number): void;
  /**
   * float32 in OUTPUT += bfloat16 in INPUT, decoded, then rounded to bfloat16 (the last reduce
   * step of a sum that ends in bfloat16): the rounded floats stay in OUTPUT and their bfloat16
   * bits go to ENCODED (encodedHalves), ready to send.
   */
  addRound(count: number, shift?: number): void;
  /** float32 in INPUT -> rounded to bfloat16: floats in OUTPUT, bfloat16 bits in ENCODED. */
  encodeRound(count: number, shift?: number): void;
  /** The views over the regions moved by `shift` (a multiple of PLACEMENT_STEP below PLACEMENT_ROOM). */
  at(shift: number): Bfloat16Views;
}

// Locals: 0 = count, 1 = shift (parameters), 2 = index, 3.. = v128 scratch.
const COUNT = 0;
const SHIFT = 1;
const INDEX = 2;
const FIRST = 3;
const SECOND = 4;
const HIGH = 5;
const LOW = 6;
const RESULT = 7;
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

/** Byte address of element INDEX for `elementBytes`-wide elements, plus SHIFT (an i32 on the stack). */
const address = (elementBytes: number): number[] => [
  ...get(INDEX),
  ...constant(Math.log2(elementBytes)),
  I32_SHL,
  ...get(SHIFT),
  I32_ADD,
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
const loopOverEights = (body: number[]): number[] =>
  loopWhileBelow(INDEX, COUNT, [...body, ...increment(INDEX, 8)]);

/** `local` = the eight bfloat16 at element INDEX of INPUT. */
const loadHalves = (local: number): number[] => [...address(2), ...load(INPUT), LOCAL_SET, local];
/** The eight bfloat16 in RESULT, stored at element INDEX of the bfloat16 region at `region`. */
const storeHalves = (region: number): number[] => [...address(2), ...get(RESULT), ...store(region)];
/** The eight bfloat16 in RESULT, as float32 (zero lower halves), stored at element INDEX of OUTPUT. */
const storeRoundedFloats: number[] = [
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
];

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

const encodeBody = loopOverEights([...loadEight, ...roundToResult, ...storeHalves(OUTPUT)]);

const decodeBody = loopOverEights([
  ...loadHalves(FIRST),
  ...address(4),
  ...get(FIRST),
  ...widenBfloat16Low(),
  ...store(OUTPUT),
  ...address(4),
  ...get(FIRST),
  ...widenBfloat16High(),
  ...store(OUTPUT + 16),
]);

const roundBody = loopOverEights([...loadEight, ...roundToResult, ...storeRoundedFloats]);

const decodeAddHalf = (widen: number[], offset: number): number[] => [
  ...address(4),
  ...address(4),
  ...load(OUTPUT + offset),
  ...get(FIRST),
  ...widen,
  ...simd(F32X4_ADD),
  ...store(OUTPUT + offset),
];
const decodeAddBody = loopOverEights([
  ...loadHalves(FIRST),
  ...decodeAddHalf(widenBfloat16Low(), 0),
  ...decodeAddHalf(widenBfloat16High(), 16),
]);

/** FIRST, SECOND = the float32 at OUTPUT + the decoded bfloat16 at INPUT; then round; store. */
const addRoundHalf = (local: number, widen: number[], offset: number): number[] => [
  ...address(4),
  ...load(OUTPUT + offset),
  ...get(RESULT),
  ...widen,
  ...simd(F32X4_ADD),
  LOCAL_SET,
  local,
];
const addRoundBody = loopOverEights([
  ...loadHalves(RESULT),
  ...addRoundHalf(FIRST, widenBfloat16Low(), 0),
  ...addRoundHalf(SECOND, widenBfloat16High(), 16),
  ...roundToResult,
  ...storeHalves(ENCODED),
  ...storeRoundedFloats,
]);

const encodeRoundBody = loopOverEights([
  ...loadEight,
  ...roundToResult,
  ...storeHalves(ENCODED),
  ...storeRoundedFloats,
]);

const KERNELS = ['encode', 'decode', 'round', 'decodeAdd', 'addRound', 'encodeRound'] as const;
const BODIES = [encodeBody, decodeBody, roundBody, decodeAddBody, addRoundBody, encodeRoundBody];

function assemble(): Uint8Array {
  const locals = [2, 1, I32, SCRATCH_LOCALS, V128];
  const bodies = BODIES.map((body) => functionBody(locals, body));
  const exports = [
    ...name('memory'),
    0x02,
    0,
    ...KERNELS.flatMap((kernel, index) => [...name(kernel), 0x00, index]),
  ];
  return wasmModule([
    [1, [1, 0x60, 2, I32, I32, 0]],
    [3, [KERNELS.length, ...KERNELS.map(() => 0)]],
    [5, [1, 0x00, PAGES]],
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
  const kernel = (name: string) => exported[name] as (count: number, shift?: number) => void;
  const views = (shift: number): Bfloat16Views => ({
    encodedHalves: new Uint16Array(memory, ENCODED + shift, SIMD_BLOCK),
    inputFloats: new Float32Array(memory, INPUT + shift, SIMD_BLOCK),
    inputHalves: new Uint16Array(memory, INPUT + shift, SIMD_BLOCK),
    outputFloats: new Float32Array(memory, OUTPUT + shift, SIMD_BLOCK),
    outputHalves: new Uint16Array(memory, OUTPUT + shift, SIMD_BLOCK),
  });
  const placed = placedViews('bfloat16 kernels', views);
  kernels = {
    ...placed.first,
    at: placed.at,
    encode: kernel('encode'),
    decode: kernel('decode'),
    round: kernel('round'),
    decodeAdd: kernel('decodeAdd'),
    addRound: kernel('addRound'),
    encodeRound: kernel('encodeRound'),
  };
  return kernels;
}
