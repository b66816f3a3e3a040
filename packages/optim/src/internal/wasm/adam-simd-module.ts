/**
 * The bytes of a tiny WebAssembly module with 128-bit SIMD Adam kernels, assembled here so the
 * package ships no binary and needs no toolchain. Exports `memory` (2 pages, never grown) and
 *   adam(byteCount: i32, stepSize, inverseCorrection2Sqrt, eps, beta1, oneMinusBeta1, beta2,
 *        oneMinusBeta2, decay, l2, sign: f32)
 *   adamAmsgrad(same)
 * which update `byteCount / 4` float32 elements (a multiple of 4) of the scratch arrays at
 * PARAM, GRAD, EXP_AVG, EXP_AVG_SQ (and MAX_EXP_AVG_SQ) in place, four lanes at a time, in float32
 * (as torch does):
 *   p = p·decay;  g = sign·grad + l2·p;  m = β1·m + (1 − β1)·g;  v = β2·v + (1 − β2)·(g·g)
 *   [amsgrad: v = vmax = max(vmax, v)];  p = p − stepSize·(m / (√v·inverseCorrection2Sqrt + eps))
 */
import {
  BLOCK,
  BR,
  BR_IF,
  END,
  F32X4_ADD,
  F32X4_DIV,
  F32X4_MAX,
  F32X4_MUL,
  F32X4_SPLAT,
  F32X4_SQRT,
  F32X4_SUB,
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
  vector,
} from '@fsdp-ts/kernels';

export const ADAM_SIMD_CHUNK = 4096; // elements per scratch array
/** The largest byteStart a caller passes: each scratch array has this much room before its chunk. */
export const ADAM_SIMD_MAXIMUM_SHIFT = 4096;
const BYTES = ADAM_SIMD_CHUNK * 4 + ADAM_SIMD_MAXIMUM_SHIFT;
export const ADAM_SIMD_OFFSETS = {
  param: 0,
  grad: BYTES,
  expAvg: 2 * BYTES,
  expAvgSq: 3 * BYTES,
  maxExpAvgSq: 4 * BYTES,
} as const; // bytes

// Parameters 0..11: byteEnd (i32), 10 f32 scalars, byteStart (i32); locals: index, then splats
// and temporaries.
const SCALARS = 10;
const BYTE_START = 11;
const INDEX = 12;
const splatOf = (scalar: number) => 13 + scalar; // v128 splat of parameter 1 + scalar
const [P, G, M, V] = [23, 24, 25, 26];
const [STEP_SIZE, INVERSE_CORRECTION, EPS, BETA1, ONE_MINUS_BETA1, BETA2, ONE_MINUS_BETA2, DECAY, L2, SIGN] =
  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(splatOf) as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];

function body(amsgrad: boolean): number[] {
  const get = (local: number) => [LOCAL_GET, local];
  const code: number[] = [];
  for (let scalar = 0; scalar < SCALARS; scalar++)
    code.push(...get(1 + scalar), ...simd(F32X4_SPLAT), LOCAL_SET, splatOf(scalar));
  code.push(...get(BYTE_START), LOCAL_SET, INDEX);
  code.push(BLOCK, 0x40, LOOP, 0x40);
  code.push(...get(INDEX), ...get(0), I32_GE_U, BR_IF, 1);
  const o = ADAM_SIMD_OFFSETS;
  // p = p·decay
  code.push(...get(INDEX), ...load(o.param, 4), ...get(DECAY), ...simd(F32X4_MUL), LOCAL_SET, P);
  // g = sign·grad + l2·p
  code.push(
    ...get(INDEX),
    ...load(o.grad, 4),
    ...get(SIGN),
    ...simd(F32X4_MUL),
    ...get(L2),
    ...get(P),
    ...simd(F32X4_MUL),
  );
  code.push(...simd(F32X4_ADD), LOCAL_SET, G);
  // m = β1·m + (1 − β1)·g
  code.push(...get(INDEX), ...get(BETA1), ...get(INDEX), ...load(o.expAvg, 4), ...simd(F32X4_MUL));
  code.push(
    ...get(ONE_MINUS_BETA1),
    ...get(G),
    ...simd(F32X4_MUL),
    ...simd(F32X4_ADD),
    LOCAL_TEE,
    M,
    ...store(o.expAvg, 4),
  );
  // v = β2·v + (1 − β2)·(g·g)
  code.push(...get(INDEX), ...get(BETA2), ...get(INDEX), ...load(o.expAvgSq, 4), ...simd(F32X4_MUL));
  code.push(
    ...get(ONE_MINUS_BETA2),
    ...get(G),
    ...get(G),
    ...simd(F32X4_MUL),
    ...simd(F32X4_MUL),
    ...simd(F32X4_ADD),
  );
  code.push(LOCAL_TEE, V, ...store(o.expAvgSq, 4));
  if (amsgrad) {
    code.push(...get(INDEX), ...get(INDEX), ...load(o.maxExpAvgSq, 4), ...get(V), ...simd(F32X4_MAX));
    code.push(LOCAL_TEE, V, ...store(o.maxExpAvgSq, 4));
  }
  // p = p − stepSize·(m / (√v·inverseCorrection2Sqrt + eps))
  code.push(...get(INDEX), ...get(P), ...get(STEP_SIZE), ...get(M), ...get(V), ...simd(F32X4_SQRT));
  code.push(
    ...get(INVERSE_CORRECTION),
    ...simd(F32X4_MUL),
    ...get(EPS),
    ...simd(F32X4_ADD),
    ...simd(F32X4_DIV),
    ...simd(F32X4_MUL),
  );
  code.push(...simd(F32X4_SUB), ...store(o.param, 4));
  code.push(...get(INDEX), I32_CONST, 16, I32_ADD, LOCAL_SET, INDEX, BR, 0);
  code.push(END, END, END);
  const locals = [2, 1, 0x7f, 14, 0x7b]; // two entries: 1 i32 (index), 14 v128 (10 splats, 4 temporaries)
  const content = [...locals, ...code];
  return [...unsignedLeb(content.length), ...content];
}

export function adamSimdModuleBytes(): Uint8Array {
  const type = [0x60, ...vector([0x7f, ...new Array<number>(SCALARS).fill(0x7d), 0x7f]), 0];
  return Uint8Array.from([
    ...MODULE_HEADER,
    ...section(1, [1, ...type]),
    ...section(3, vector([0, 0])),
    ...section(5, [1, 0x00, 2]),
    ...section(7, [3, ...name('memory'), 0x02, 0, ...name('adam'), 0x00, 0, ...name('adamAmsgrad'), 0x00, 1]),
    ...section(10, [2, ...body(false), ...body(true)]),
  ]);
}
