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
import { f32x4, load, MODULE_HEADER, name, op, section, store, unsignedLeb, vector } from './wasm-assembly';

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
  const get = (local: number) => [op.localGet, local];
  const code: number[] = [];
  for (let scalar = 0; scalar < SCALARS; scalar++)
    code.push(...get(1 + scalar), ...f32x4.splat, op.localSet, splatOf(scalar));
  code.push(...get(BYTE_START), op.localSet, INDEX);
  code.push(op.block, 0x40, op.loop, 0x40);
  code.push(...get(INDEX), ...get(0), op.i32GeU, op.brIf, 1);
  const o = ADAM_SIMD_OFFSETS;
  // p = p·decay
  code.push(...get(INDEX), ...load(o.param), ...get(DECAY), ...f32x4.mul, op.localSet, P);
  // g = sign·grad + l2·p
  code.push(...get(INDEX), ...load(o.grad), ...get(SIGN), ...f32x4.mul, ...get(L2), ...get(P), ...f32x4.mul);
  code.push(...f32x4.add, op.localSet, G);
  // m = β1·m + (1 − β1)·g
  code.push(...get(INDEX), ...get(BETA1), ...get(INDEX), ...load(o.expAvg), ...f32x4.mul);
  code.push(
    ...get(ONE_MINUS_BETA1),
    ...get(G),
    ...f32x4.mul,
    ...f32x4.add,
    op.localTee,
    M,
    ...store(o.expAvg),
  );
  // v = β2·v + (1 − β2)·(g·g)
  code.push(...get(INDEX), ...get(BETA2), ...get(INDEX), ...load(o.expAvgSq), ...f32x4.mul);
  code.push(...get(ONE_MINUS_BETA2), ...get(G), ...get(G), ...f32x4.mul, ...f32x4.mul, ...f32x4.add);
  code.push(op.localTee, V, ...store(o.expAvgSq));
  if (amsgrad) {
    code.push(...get(INDEX), ...get(INDEX), ...load(o.maxExpAvgSq), ...get(V), ...f32x4.max);
    code.push(op.localTee, V, ...store(o.maxExpAvgSq));
  }
  // p = p − stepSize·(m / (√v·inverseCorrection2Sqrt + eps))
  code.push(...get(INDEX), ...get(P), ...get(STEP_SIZE), ...get(M), ...get(V), ...f32x4.sqrt);
  code.push(...get(INVERSE_CORRECTION), ...f32x4.mul, ...get(EPS), ...f32x4.add, ...f32x4.div, ...f32x4.mul);
  code.push(...f32x4.sub, ...store(o.param));
  code.push(...get(INDEX), op.i32Const, 16, op.i32Add, op.localSet, INDEX, op.br, 0);
  code.push(op.end, op.end, op.end);
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
