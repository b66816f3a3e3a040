/**
 * What the reduction and bfloat16 kernels compute identically, written once: the bfloat16
 * widening (bfloat16-simd.ts and in-place-bfloat16-simd.ts), the six reducers' instructions and
 * their NaN-keeping select (reduce-simd.ts and in-place-simd.ts, in each of their variants), and
 * the table of views placed at every shift ([Note: scratch placement]) that the kernels with
 * their own memory hand out (bfloat16-simd.ts, reduce-simd.ts). Their roundings differ on
 * purpose ([Note: bfloat16 rounding in 16-bit lanes] against 32-bit lanes in place), so those
 * stay with their kernels.
 */

import { constant, get, simd } from '../wasm/wasm-encoding';
import {
  F32X4_ADD,
  F32X4_GE,
  F32X4_LE,
  F32X4_NE,
  I32X4_ADD,
  I32X4_EXTEND_HIGH_I16X8_U,
  I32X4_EXTEND_LOW_I16X8_U,
  I32X4_MAX_S,
  I32X4_MIN_S,
  I32X4_SHL,
  V128_BITSELECT,
  V128_OR,
} from '../wasm/wasm-opcodes';
import { PLACEMENT_ROOM, PLACEMENT_STEP } from './scratch-placement';

/** The float32 bits (i32x4) of the four bfloat16 in the low or high half of the v128 on the stack. */
const widenBfloat16 = (extend: number): number[] => [...simd(extend), ...constant(16), ...simd(I32X4_SHL)];
export const widenBfloat16Low = (): number[] => widenBfloat16(I32X4_EXTEND_LOW_I16X8_U);
export const widenBfloat16High = (): number[] => widenBfloat16(I32X4_EXTEND_HIGH_I16X8_U);

/** The six reductions every reduce kernel module exports, by name. */
export type ReduceKernelName = 'sumFloat' | 'maxFloat' | 'minFloat' | 'sumInt' | 'maxInt' | 'minInt';

/**
 * How each reduction combines two vectors: one lane-wise instruction, or for float32 max and min
 * a comparison whose select keeps the accumulator's -0 and NaN, as the scalar kernels do
 * (`a >= b || isNaN(a) ? a : b`).
 */
export const REDUCTIONS: Readonly<Record<ReduceKernelName, { lanewise: number } | { compare: number }>> = {
  sumFloat: { lanewise: F32X4_ADD },
  maxFloat: { compare: F32X4_GE },
  minFloat: { compare: F32X4_LE },
  sumInt: { lanewise: I32X4_ADD },
  maxInt: { lanewise: I32X4_MAX_S },
  minInt: { lanewise: I32X4_MIN_S },
};
export const REDUCE_KERNEL_NAMES = Object.keys(REDUCTIONS) as ReduceKernelName[];

/**
 * `a (compare) b || a != a ? a : b` on the v128 locals `a` (the accumulator's lanes) and `b`,
 * leaving the result on the stack.
 */
export const selectKeepingNaN = (compare: number, a: number, b: number): number[] => [
  ...get(a),
  ...get(b),
  ...simd(compare),
  ...get(a),
  ...get(a),
  ...simd(F32X4_NE),
  ...simd(V128_OR),
  ...simd(V128_BITSELECT),
];

/**
 * The result of `reduction` on the two vectors `loadA` and `loadB` push, on the stack; the select
 * of max and min goes through the v128 locals `a` and `b` (local.tee keeps each on the stack).
 */
export function combine(
  reduction: ReduceKernelName,
  loadA: readonly number[],
  loadB: readonly number[],
  a: number,
  b: number,
  tee: number,
): number[] {
  const how = REDUCTIONS[reduction];
  if ('lanewise' in how) return [...loadA, ...loadB, ...simd(how.lanewise)];
  return [...loadA, tee, a, ...loadB, tee, b, ...selectKeepingNaN(how.compare, a, b)];
}

/**
 * The views `views(shift)` at every shift a kernel accepts (multiples of PLACEMENT_STEP below
 * PLACEMENT_ROOM), and `at(shift)` over them, which names the kernels when a shift is off.
 */
export function placedViews<Views>(
  kernels: string,
  views: (shift: number) => Views,
): { first: Views; at(shift: number): Views } {
  const placed = Array.from({ length: PLACEMENT_ROOM / PLACEMENT_STEP }, (_, index) =>
    views(index * PLACEMENT_STEP),
  );
  return {
    first: placed[0]!,
    at: (shift) => {
      const found = placed[shift / PLACEMENT_STEP];
      if (found === undefined)
        throw new Error(
          `${kernels}: shift ${shift} is not a multiple of ${PLACEMENT_STEP} below ${PLACEMENT_ROOM} ([Note: scratch placement])`,
        );
      return found;
    },
  };
}
