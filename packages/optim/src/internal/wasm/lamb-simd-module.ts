/**
 * The bytes of a tiny WebAssembly module with 128-bit SIMD kernels for LAMB's two phases (see
 * lamb-kernel.ts for the formulas), assembled here like adam-simd-module.ts. Exports `memory`
 * (2 pages, never grown) and
 *   lambMoments(byteEnd: i32, beta1, beta3, beta2, oneMinusBeta2, inverseCorrection1,
 *               inverseCorrection2Sqrt, eps, weightDecay: f32, byteStart: i32)
 *     m = β1·m + β3·g;  v = β2·v + (1 − β2)·(g·g);  u = (m·ic1) / (√v·ic2 + eps) + wd·p
 *     over the float32 elements of bytes [byteStart, byteEnd) of the scratch arrays at PARAM, GRAD,
 *     EXP_AVG and EXP_AVG_SQ (m and v in place), and writes Σp² and Σu², each as two float64 lanes
 *     (squares of the float32 values widened first, so exact), at RESULTS;
 *   lambApply(byteEnd: i32, scale, inverseCorrection1, inverseCorrection2Sqrt, eps, weightDecay: f32,
 *             byteStart: i32)
 *     p = p − scale·u, with u computed by the same float32 operations in the same order as in
 *     lambMoments from the stored m, v and the unchanged p.
 * Arithmetic is float32 four lanes at a time, as torch's float32 LAMB does; the norms are
 * accumulated in float64.
 */

import {
  BLOCK,
  BR,
  BR_IF,
  END,
  F32,
  F32X4_ADD,
  F32X4_DIV,
  F32X4_MUL,
  F32X4_SPLAT,
  F32X4_SQRT,
  F32X4_SUB,
  F64X2_ADD,
  F64X2_MUL,
  F64X2_PROMOTE_LOW_F32X4,
  I8X16_SHUFFLE,
  I32,
  I32_ADD,
  I32_CONST,
  I32_GE_U,
  LOCAL_GET,
  LOCAL_SET,
  LOCAL_TEE,
  LOOP,
  load,
  MODULE_HEADER,
  name,
  section,
  simd,
  store,
  unsignedLeb,
  V128,
  vector,
} from '@fsdp-ts/kernels';
import { ADAM_SIMD_CHUNK, ADAM_SIMD_MAXIMUM_SHIFT } from './adam-simd-module';

/** i8x16.shuffle taking bytes 8..15 of the first operand into lanes 0..7 (the high two floats low). */
const highHalfToLow = [...simd(I8X16_SHUFFLE), 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15];

/** Elements per scratch array, and the room before each chunk: Adam's, so `scratchShift` applies. */
export const LAMB_SIMD_CHUNK = ADAM_SIMD_CHUNK;
export const LAMB_SIMD_MAXIMUM_SHIFT = ADAM_SIMD_MAXIMUM_SHIFT;
const BYTES = LAMB_SIMD_CHUNK * 4 + LAMB_SIMD_MAXIMUM_SHIFT;
export const LAMB_SIMD_OFFSETS = {
  param: 0,
  grad: BYTES,
  expAvg: 2 * BYTES,
  expAvgSq: 3 * BYTES,
  /** Σp² (two float64 lanes), then Σu² (two float64 lanes). */
  results: 4 * BYTES,
} as const; // bytes

const get = (local: number) => [LOCAL_GET, local];
/** local = the vector at `offset` + index. */
const loadInto = (index: number, offset: number, local: number) => [
  ...get(index),
  ...load(offset, 4),
  LOCAL_SET,
  local,
];

/**
 * A function body: parameters byteEnd (0), `scalars` f32 (1..scalars), byteStart; locals: the
 * index, a splat per scalar, then `temporaries` v128.
 */
function functionBody(
  scalars: number,
  temporaries: number,
  loopBody: (locals: Locals) => number[],
  after: (locals: Locals) => number[],
): number[] {
  const byteStart = scalars + 1;
  const index = scalars + 2;
  const splat = (scalar: number) => index + 1 + scalar;
  const temporary = (which: number) => index + 1 + scalars + which;
  const locals: Locals = { index, splat, temporary };
  const code: number[] = [];
  for (let scalar = 0; scalar < scalars; scalar++)
    code.push(...get(1 + scalar), ...simd(F32X4_SPLAT), LOCAL_SET, splat(scalar));
  code.push(...get(byteStart), LOCAL_SET, index);
  code.push(BLOCK, 0x40, LOOP, 0x40);
  code.push(...get(index), ...get(0), I32_GE_U, BR_IF, 1);
  code.push(...loopBody(locals));
  code.push(...get(index), I32_CONST, 16, I32_ADD, LOCAL_SET, index, BR, 0);
  code.push(END, END);
  code.push(...after(locals), END);
  const declarations = [2, 1, I32, ...unsignedLeb(scalars + temporaries), V128];
  const content = [...declarations, ...code];
  return [...unsignedLeb(content.length), ...content];
}

interface Locals {
  index: number;
  splat: (scalar: number) => number;
  temporary: (which: number) => number;
}

/**
 * u = (m·ic1) / (√v·ic2 + eps) + wd·p onto the stack, from locals holding m, v, p and the splats:
 * the one sequence both functions run, so phase 2 recomputes phase 1's u bit for bit.
 */
function update(
  m: number,
  v: number,
  p: number,
  ic1: number,
  ic2: number,
  eps: number,
  wd: number,
): number[] {
  return [
    ...get(m),
    ...get(ic1),
    ...simd(F32X4_MUL),
    ...get(v),
    ...simd(F32X4_SQRT),
    ...get(ic2),
    ...simd(F32X4_MUL),
    ...get(eps),
    ...simd(F32X4_ADD),
    ...simd(F32X4_DIV),
    ...get(wd),
    ...get(p),
    ...simd(F32X4_MUL),
    ...simd(F32X4_ADD),
  ];
}

/** accumulator += Σ over the four lanes of `values`, squared in float64, as two float64 lanes. */
function addSquares(accumulator: number, values: number, scratch: number): number[] {
  return [
    ...get(accumulator),
    ...get(values),
    ...simd(F64X2_PROMOTE_LOW_F32X4),
    LOCAL_TEE,
    scratch,
    ...get(scratch),
    ...simd(F64X2_MUL),
    ...simd(F64X2_ADD),
    ...get(values),
    ...get(values),
    ...highHalfToLow,
    ...simd(F64X2_PROMOTE_LOW_F32X4),
    LOCAL_TEE,
    scratch,
    ...get(scratch),
    ...simd(F64X2_MUL),
    ...simd(F64X2_ADD),
    LOCAL_SET,
    accumulator,
  ];
}

const o = LAMB_SIMD_OFFSETS;

function momentsBody(): number[] {
  // Scalars: β1, β3, β2, 1 − β2, ic1, ic2, eps, wd. Temporaries: g, m, v, p, u, Σp², Σu², scratch.
  return functionBody(
    8,
    8,
    ({ index, splat, temporary }) => {
      const [beta1, beta3, beta2, oneMinusBeta2, ic1, ic2, eps, wd] = [0, 1, 2, 3, 4, 5, 6, 7].map(
        splat,
      ) as number[];
      const [g, m, v, p, u, weightSquares, updateSquares, scratch] = [0, 1, 2, 3, 4, 5, 6, 7].map(
        temporary,
      ) as number[];
      return [
        ...loadInto(index, o.grad, g!),
        // m = β1·m + β3·g
        ...get(index),
        ...get(beta1!),
        ...get(index),
        ...load(o.expAvg, 4),
        ...simd(F32X4_MUL),
        ...get(beta3!),
        ...get(g!),
        ...simd(F32X4_MUL),
        ...simd(F32X4_ADD),
        LOCAL_TEE,
        m!,
        ...store(o.expAvg, 4),
        // v = β2·v + (1 − β2)·(g·g)
        ...get(index),
        ...get(beta2!),
        ...get(index),
        ...load(o.expAvgSq, 4),
        ...simd(F32X4_MUL),
        ...get(oneMinusBeta2!),
        ...get(g!),
        ...get(g!),
        ...simd(F32X4_MUL),
        ...simd(F32X4_MUL),
        ...simd(F32X4_ADD),
        LOCAL_TEE,
        v!,
        ...store(o.expAvgSq, 4),
        ...loadInto(index, o.param, p!),
        ...update(m!, v!, p!, ic1!, ic2!, eps!, wd!),
        LOCAL_SET,
        u!,
        ...addSquares(weightSquares!, p!, scratch!),
        ...addSquares(updateSquares!, u!, scratch!),
      ];
    },
    ({ temporary }) => [
      I32_CONST,
      0,
      ...get(temporary(5)),
      ...store(o.results, 4),
      I32_CONST,
      0,
      ...get(temporary(6)),
      ...store(o.results + 16, 4),
    ],
  );
}

function applyBody(): number[] {
  // Scalars: scale, ic1, ic2, eps, wd. Temporaries: m, v, p.
  return functionBody(
    5,
    3,
    ({ index, splat, temporary }) => {
      const [scale, ic1, ic2, eps, wd] = [0, 1, 2, 3, 4].map(splat) as number[];
      const [m, v, p] = [0, 1, 2].map(temporary) as number[];
      return [
        ...loadInto(index, o.expAvg, m!),
        ...loadInto(index, o.expAvgSq, v!),
        ...loadInto(index, o.param, p!),
        // p = p − scale·u
        ...get(index),
        ...get(p!),
        ...get(scale!),
        ...update(m!, v!, p!, ic1!, ic2!, eps!, wd!),
        ...simd(F32X4_MUL),
        ...simd(F32X4_SUB),
        ...store(o.param, 4),
      ];
    },
    () => [],
  );
}

function functionType(scalars: number): number[] {
  return [0x60, ...vector([I32, ...new Array<number>(scalars).fill(F32), I32]), 0];
}

export function lambSimdModuleBytes(): Uint8Array {
  return Uint8Array.from([
    ...MODULE_HEADER,
    ...section(1, [2, ...functionType(8), ...functionType(5)]),
    ...section(3, vector([0, 1])),
    ...section(5, [1, 0x00, 2]),
    ...section(7, [
      3,
      ...name('memory'),
      0x02,
      0,
      ...name('lambMoments'),
      0x00,
      0,
      ...name('lambApply'),
      0x00,
      1,
    ]),
    ...section(10, [2, ...momentsBody(), ...applyBody()]),
  ]);
}
