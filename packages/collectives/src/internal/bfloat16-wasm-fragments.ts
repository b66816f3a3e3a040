/**
 * Instruction fragments the bfloat16 kernels share (bfloat16-simd.ts and
 * shm/in-place-bfloat16-simd.ts). Only what both compute identically is here: their roundings
 * differ on purpose ([Note: bfloat16 rounding in 16-bit lanes] against 32-bit lanes in place).
 */

import { constant, simd } from './wasm-assembly.js';
import { I32X4_EXTEND_HIGH_I16X8_U, I32X4_EXTEND_LOW_I16X8_U, I32X4_SHL } from './wasm-opcodes.js';

/** The float32 bits (i32x4) of the four bfloat16 in the low or high half of the v128 on the stack. */
const widenBfloat16 = (extend: number): number[] => [...simd(extend), ...constant(16), ...simd(I32X4_SHL)];
export const widenBfloat16Low = (): number[] => widenBfloat16(I32X4_EXTEND_LOW_I16X8_U);
export const widenBfloat16High = (): number[] => widenBfloat16(I32X4_EXTEND_HIGH_I16X8_U);
