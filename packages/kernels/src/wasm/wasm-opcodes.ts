/**
 * The named WebAssembly opcodes every fsdp-ts SIMD kernel is assembled from (WebAssembly core
 * 2.0 with fixed-width SIMD: collectives' reductions and bfloat16 conversions, optim's Adam and
 * LAMB, nn's GELU and layer norm), in one place so no package keeps a copy. Core opcodes are
 * single bytes; the SIMD ones are the numbers that follow the 0xfd prefix (wasm-encoding.ts
 * `simd` encodes them). Names are the specification's, upper-cased.
 */

// Control.
export const BLOCK = 0x02;
export const LOOP = 0x03;
export const END = 0x0b;
export const BR = 0x0c;
export const BR_IF = 0x0d;
/** The block type of a block or loop that yields nothing. */
export const EMPTY_BLOCK = 0x40;

// Locals.
export const LOCAL_GET = 0x20;
export const LOCAL_SET = 0x21;
export const LOCAL_TEE = 0x22;

// Memory (each followed by its alignment, log2, and offset).
export const F32_LOAD = 0x2a;
export const F32_STORE = 0x38;

// i32.
export const I32_CONST = 0x41;
export const I32_GE_U = 0x4f;
export const I32_ADD = 0x6a;
export const I32_SHL = 0x74;
export const I32_SHR_U = 0x76;

// f32.
export const F32_CONST = 0x43;
export const F32_ADD = 0x92;
export const F32_SUB = 0x93;
export const F32_MUL = 0x94;

// SIMD (after SIMD_PREFIX).
export const SIMD_PREFIX = 0xfd;
export const V128_LOAD = 0x00;
export const V128_STORE = 0x0b;
export const V128_CONST = 0x0c;
export const I8X16_SHUFFLE = 0x0d;
export const I32X4_SPLAT = 0x11;
export const F32X4_SPLAT = 0x13;
export const I16X8_EQ = 0x2d;
export const I16X8_GT_S = 0x31;
export const I32X4_GT_S = 0x3b;
export const F32X4_NE = 0x42;
export const F32X4_LE = 0x45;
export const F32X4_GE = 0x46;
export const V128_AND = 0x4e;
export const V128_OR = 0x50;
export const V128_XOR = 0x51;
export const V128_BITSELECT = 0x52;
export const F64X2_PROMOTE_LOW_F32X4 = 0x5f;
export const I16X8_NARROW_I32X4_U = 0x86;
export const I16X8_ADD_SAT_S = 0x8f;
export const I16X8_SUB = 0x91;
export const I32X4_EXTEND_LOW_I16X8_U = 0xa9;
export const I32X4_EXTEND_HIGH_I16X8_U = 0xaa;
export const I32X4_SHL = 0xab;
export const I32X4_SHR_U = 0xad;
export const I32X4_ADD = 0xae;
export const I32X4_MIN_S = 0xb6;
export const I32X4_MAX_S = 0xb8;
export const F32X4_SQRT = 0xe3;
export const F32X4_ADD = 0xe4;
export const F32X4_SUB = 0xe5;
export const F32X4_MUL = 0xe6;
export const F32X4_DIV = 0xe7;
export const F32X4_MAX = 0xe9;
export const F64X2_ADD = 0xf0;
export const F64X2_MUL = 0xf2;
