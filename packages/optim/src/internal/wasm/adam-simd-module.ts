/**
 * The bytes of a tiny WebAssembly module with 128-bit SIMD Adam kernels, assembled here so the
 * package ships no binary and needs no toolchain. Its two functions
 *   adam(byteCount: i32, stepSize, inverseCorrection2Sqrt, eps, beta1, oneMinusBeta1, beta2,
 *        oneMinusBeta2, decay, l2, sign: f32, param, grad, expAvg, expAvgSq, maxExpAvgSq: i32)
 *   adamAmsgrad(same)
 * update `byteCount / 4` float32 elements (a multiple of 4) of the arrays at the five byte
 * addresses in place, four lanes at a time, in float32 (as torch does):
 *   p = p·decay;  g = sign·grad + l2·p;  m = β1·m + (1 − β1)·g;  v = β2·v + (1 − β2)·(g·g)
 *   [amsgrad: v = vmax = max(vmax, v)];  p = p − stepSize·(m / (√v·inverseCorrection2Sqrt + eps))
 * Each vector is loaded before it is stored, so the arrays may be anywhere in the memory.
 *
 * Two builds of the same code: `'scratch'` has a memory of its own (exported, 2 pages, never
 * grown) holding the scratch arrays at ADAM_SIMD_OFFSETS that chunks are copied through;
 * `'block'` imports the memory of a kernel block ([Note: kernel blocks] in @fsdp-ts/kernels) and
 * updates arrays that live there where they are.
 */
import {
  END,
  F32X4_ADD,
  F32X4_DIV,
  F32X4_MAX,
  F32X4_MUL,
  F32X4_SPLAT,
  F32X4_SQRT,
  F32X4_SUB,
  get,
  I32_ADD,
  increment,
  LOCAL_SET,
  LOCAL_TEE,
  load,
  loopWhileBelow,
  MODULE_HEADER,
  memoryImport,
  name,
  section,
  simd,
  store,
  unsignedLeb,
  vector,
} from '@fsdp-ts/kernels';

export const ADAM_SIMD_CHUNK = 4096; // elements per scratch array
/** The largest shift a caller gives the scratch arrays: each has this much room before its chunk. */
export const ADAM_SIMD_MAXIMUM_SHIFT = 4096;
const BYTES = ADAM_SIMD_CHUNK * 4 + ADAM_SIMD_MAXIMUM_SHIFT;
export const ADAM_SIMD_OFFSETS = {
  param: 0,
  grad: BYTES,
  expAvg: 2 * BYTES,
  expAvgSq: 3 * BYTES,
  maxExpAvgSq: 4 * BYTES,
} as const; // bytes, in the scratch build's memory

// Parameters 0..15: byteCount (i32), 10 f32 scalars, 5 addresses (i32); locals: index, then
// splats and temporaries.
const SCALARS = 10;
const ADDRESS = { param: 11, grad: 12, expAvg: 13, expAvgSq: 14, maxExpAvgSq: 15 } as const;
const INDEX = 16;
const splatOf = (scalar: number) => 17 + scalar; // v128 splat of parameter 1 + scalar
const [P, G, M, V] = [27, 28, 29, 30];
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

/** The address of the current vector of an array: its base address plus the loop's byte index. */
const at = (array: keyof typeof ADDRESS) => [...get(ADDRESS[array]), ...get(INDEX), I32_ADD];

function body(amsgrad: boolean): number[] {
  const code: number[] = [];
  for (let scalar = 0; scalar < SCALARS; scalar++)
    code.push(...get(1 + scalar), ...simd(F32X4_SPLAT), LOCAL_SET, splatOf(scalar));
  const step: number[] = [];
  // p = p·decay
  step.push(...at('param'), ...load(0), ...get(DECAY), ...simd(F32X4_MUL), LOCAL_SET, P);
  // g = sign·grad + l2·p
  step.push(...at('grad'), ...load(0), ...get(SIGN), ...simd(F32X4_MUL), ...get(L2), ...get(P));
  step.push(...simd(F32X4_MUL), ...simd(F32X4_ADD), LOCAL_SET, G);
  // m = β1·m + (1 − β1)·g
  step.push(...at('expAvg'), ...get(BETA1), ...at('expAvg'), ...load(0), ...simd(F32X4_MUL));
  step.push(...get(ONE_MINUS_BETA1), ...get(G), ...simd(F32X4_MUL), ...simd(F32X4_ADD));
  step.push(LOCAL_TEE, M, ...store(0));
  // v = β2·v + (1 − β2)·(g·g)
  step.push(...at('expAvgSq'), ...get(BETA2), ...at('expAvgSq'), ...load(0), ...simd(F32X4_MUL));
  step.push(...get(ONE_MINUS_BETA2), ...get(G), ...get(G), ...simd(F32X4_MUL), ...simd(F32X4_MUL));
  step.push(...simd(F32X4_ADD), LOCAL_TEE, V, ...store(0));
  if (amsgrad) {
    step.push(...at('maxExpAvgSq'), ...at('maxExpAvgSq'), ...load(0), ...get(V), ...simd(F32X4_MAX));
    step.push(LOCAL_TEE, V, ...store(0));
  }
  // p = p − stepSize·(m / (√v·inverseCorrection2Sqrt + eps))
  step.push(...at('param'), ...get(P), ...get(STEP_SIZE), ...get(M), ...get(V), ...simd(F32X4_SQRT));
  step.push(...get(INVERSE_CORRECTION), ...simd(F32X4_MUL), ...get(EPS), ...simd(F32X4_ADD));
  step.push(...simd(F32X4_DIV), ...simd(F32X4_MUL), ...simd(F32X4_SUB), ...store(0));
  step.push(...increment(INDEX, 16));
  // index starts at 0 (locals are zero-initialised); parameter 0 is the byte count.
  code.push(...loopWhileBelow(INDEX, 0, step), END);
  const locals = [2, 1, 0x7f, 14, 0x7b]; // two entries: 1 i32 (index), 14 v128 (10 splats, 4 temporaries)
  const content = [...locals, ...code];
  return [...unsignedLeb(content.length), ...content];
}

/** The module's bytes: `'scratch'` exports a memory of its own, `'block'` imports one. */
export function adamSimdModuleBytes(memory: 'scratch' | 'block' = 'scratch'): Uint8Array {
  const type = [
    0x60,
    ...vector([0x7f, ...new Array<number>(SCALARS).fill(0x7d), 0x7f, 0x7f, 0x7f, 0x7f, 0x7f]),
    0,
  ];
  const functions = [...name('adam'), 0x00, 0, ...name('adamAmsgrad'), 0x00, 1];
  const memorySections =
    memory === 'scratch'
      ? [...section(5, [1, 0x00, 2])]
      : [...section(2, [1, ...memoryImport({ minimumPages: 1 })])];
  const exportCount = memory === 'scratch' ? 3 : 2;
  const memoryExport = memory === 'scratch' ? [...name('memory'), 0x02, 0] : [];
  return Uint8Array.from([
    ...MODULE_HEADER,
    ...section(1, [1, ...type]),
    ...(memory === 'block' ? memorySections : []),
    ...section(3, vector([0, 0])),
    ...(memory === 'scratch' ? memorySections : []),
    ...section(7, [exportCount, ...memoryExport, ...functions]),
    ...section(10, [2, ...body(false), ...body(true)]),
  ]);
}
