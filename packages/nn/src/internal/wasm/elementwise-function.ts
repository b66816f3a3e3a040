import {
  BLOCK,
  BR,
  BR_IF,
  EMPTY_BLOCK,
  END,
  F32,
  F32_ADD,
  F32_CONST,
  F32_LOAD,
  F32_MUL,
  F32_STORE,
  F32_SUB,
  F32X4_ADD,
  F32X4_MUL,
  F32X4_SPLAT,
  F32X4_SUB,
  FUNCTION_TYPE,
  float32Bytes,
  I32,
  I32_ADD,
  I32_CONST,
  I32_GE_U,
  I32_SHL,
  I32_SHR_U,
  LOCAL_GET,
  LOCAL_SET,
  LOCAL_TEE,
  LOOP,
  simd,
  unsignedLeb,
  V128,
  V128_CONST,
  V128_LOAD,
  V128_STORE,
  vectorOf,
} from '@fsdp-ts/kernels';

/**
 * One element step written once and emitted twice (see [Note: SIMD loops on the tfjs heap]):
 * over f32x4 lanes for the body of an array, over single f32 values for its tail. The same
 * sequence of float32 operations runs in both, so a tail element equals what a lane would give.
 */
export interface Lanes {
  /** Pushes the current element(s) of the float32 array whose byte address is parameter `pointer`. */
  load(pointer: number): number[];
  /** Pushes float32 parameter `scalar` (splat across the lanes). */
  scalar(scalar: number): number[];
  /** Stores `value` (code pushing one value) at the current element(s) of parameter `pointer`. */
  store(pointer: number, value: readonly number[]): number[];
  constant(value: number): number[];
  get(temporary: number): number[];
  set(temporary: number): number[];
  tee(temporary: number): number[];
  add: readonly number[];
  sub: readonly number[];
  mul: readonly number[];
}

export interface ElementwiseFunction {
  /** How many i32 byte addresses the function takes (its parameters before the element count). */
  pointers: number;
  /** How many f32 parameters follow the addresses (numbered 0 .. scalars - 1; default none). */
  scalars?: number;
  /** How many temporaries `step` uses (numbered 0 .. temporaries - 1). */
  temporaries: number;
  step(lanes: Lanes): number[];
}

/** The function's type: `pointers` i32 addresses, `scalars` f32 values, the i32 element count. */
export function elementwiseType(definition: ElementwiseFunction): number[] {
  const parameters = [
    ...new Array<number>(definition.pointers).fill(I32),
    ...new Array<number>(definition.scalars ?? 0).fill(F32),
    I32,
  ];
  return [FUNCTION_TYPE, ...vectorOf(parameters.length, parameters), ...vectorOf(0, [])];
}

const MEMORY_ALIGNMENT = 2; // log2 of the 4 bytes a float32 tensor's address is known to be aligned to

/**
 * The code entry (size-prefixed locals and body) of `definition`: elements [0, count − count % 4)
 * four at a time, then the rest one at a time, so nothing outside [0, count) is read or written.
 */
export function elementwiseCode(definition: ElementwiseFunction): number[] {
  const scalars = definition.scalars ?? 0;
  const scalarParameter = (scalar: number) => definition.pointers + scalar;
  const count = definition.pointers + scalars;
  const index = count + 1; // byte offset of the current element(s)
  const end = count + 2;
  const splat = (scalar: number) => count + 3 + scalar; // v128 locals holding the scalars' splats
  const vectorTemporary = (temporary: number) => count + 3 + scalars + temporary;
  const scalarTemporary = (temporary: number) => count + 3 + scalars + definition.temporaries + temporary;
  const address = (pointer: number) => [LOCAL_GET, pointer, LOCAL_GET, index, I32_ADD];
  const shared = (temporary: (t: number) => number) => ({
    get: (t: number) => [LOCAL_GET, temporary(t)],
    set: (t: number) => [LOCAL_SET, temporary(t)],
    tee: (t: number) => [LOCAL_TEE, temporary(t)],
  });
  const vector: Lanes = {
    load: (pointer) => [...address(pointer), ...simd(V128_LOAD), MEMORY_ALIGNMENT, 0],
    store: (pointer, value) => [...address(pointer), ...value, ...simd(V128_STORE), MEMORY_ALIGNMENT, 0],
    constant: (value) => {
      const lane = float32Bytes(value);
      return [...simd(V128_CONST), ...lane, ...lane, ...lane, ...lane];
    },
    scalar: (scalar) => [LOCAL_GET, splat(scalar)],
    ...shared(vectorTemporary),
    add: simd(F32X4_ADD),
    sub: simd(F32X4_SUB),
    mul: simd(F32X4_MUL),
  };
  const scalar: Lanes = {
    load: (pointer) => [...address(pointer), F32_LOAD, MEMORY_ALIGNMENT, 0],
    store: (pointer, value) => [...address(pointer), ...value, F32_STORE, MEMORY_ALIGNMENT, 0],
    constant: (value) => [F32_CONST, ...float32Bytes(value)],
    scalar: (scalar) => [LOCAL_GET, scalarParameter(scalar)],
    ...shared(scalarTemporary),
    add: [F32_ADD],
    sub: [F32_SUB],
    mul: [F32_MUL],
  };
  const loop = (lanes: Lanes, bytesPerStep: number) => [
    BLOCK,
    EMPTY_BLOCK,
    LOOP,
    EMPTY_BLOCK,
    ...[LOCAL_GET, index, LOCAL_GET, end, I32_GE_U, BR_IF, 1],
    ...definition.step(lanes),
    ...[LOCAL_GET, index, I32_CONST, bytesPerStep, I32_ADD, LOCAL_SET, index, BR, 0],
    END,
    END,
  ];
  const splats = Array.from({ length: scalars }, (_, scalar) => [
    ...[LOCAL_GET, scalarParameter(scalar), ...simd(F32X4_SPLAT), LOCAL_SET, splat(scalar)],
  ]).flat();
  const body = [
    ...splats,
    ...[I32_CONST, 0, LOCAL_SET, index],
    // end = (count >>> 2) << 4: the bytes of the whole groups of four
    ...[LOCAL_GET, count, I32_CONST, 2, I32_SHR_U, I32_CONST, 4, I32_SHL, LOCAL_SET, end],
    ...loop(vector, 16),
    // end = count << 2: every element's bytes
    ...[LOCAL_GET, count, I32_CONST, 2, I32_SHL, LOCAL_SET, end],
    ...loop(scalar, 4),
    END,
  ];
  const temporaries = unsignedLeb(definition.temporaries);
  const locals = vectorOf(3, [
    ...[2, I32],
    ...[...unsignedLeb(scalars + definition.temporaries), V128],
    ...[...temporaries, F32],
  ]);
  const content = [...locals, ...body];
  return [...unsignedLeb(content.length), ...content];
}
