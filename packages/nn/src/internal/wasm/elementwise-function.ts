import {
  float32Bytes,
  opcode as op,
  simdOpcode as simd,
  unsignedLeb,
  valueType,
  vectorOf,
} from './wasm-encoding';

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
    ...new Array<number>(definition.pointers).fill(valueType.i32),
    ...new Array<number>(definition.scalars ?? 0).fill(valueType.f32),
    valueType.i32,
  ];
  return [0x60, ...vectorOf(parameters.length, parameters), ...vectorOf(0, [])];
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
  const address = (pointer: number) => [op.localGet, pointer, op.localGet, index, op.i32Add];
  const shared = (temporary: (t: number) => number) => ({
    get: (t: number) => [op.localGet, temporary(t)],
    set: (t: number) => [op.localSet, temporary(t)],
    tee: (t: number) => [op.localTee, temporary(t)],
  });
  const vector: Lanes = {
    load: (pointer) => [...address(pointer), ...simd.v128Load, MEMORY_ALIGNMENT, 0],
    store: (pointer, value) => [...address(pointer), ...value, ...simd.v128Store, MEMORY_ALIGNMENT, 0],
    constant: (value) => {
      const lane = float32Bytes(value);
      return [...simd.v128Const, ...lane, ...lane, ...lane, ...lane];
    },
    scalar: (scalar) => [op.localGet, splat(scalar)],
    ...shared(vectorTemporary),
    add: simd.f32x4Add,
    sub: simd.f32x4Sub,
    mul: simd.f32x4Mul,
  };
  const scalar: Lanes = {
    load: (pointer) => [...address(pointer), op.f32Load, MEMORY_ALIGNMENT, 0],
    store: (pointer, value) => [...address(pointer), ...value, op.f32Store, MEMORY_ALIGNMENT, 0],
    constant: (value) => [op.f32Const, ...float32Bytes(value)],
    scalar: (scalar) => [op.localGet, scalarParameter(scalar)],
    ...shared(scalarTemporary),
    add: [op.f32Add],
    sub: [op.f32Sub],
    mul: [op.f32Mul],
  };
  const loop = (lanes: Lanes, bytesPerStep: number) => [
    op.block,
    op.emptyBlockType,
    op.loop,
    op.emptyBlockType,
    ...[op.localGet, index, op.localGet, end, op.i32GeU, op.brIf, 1],
    ...definition.step(lanes),
    ...[op.localGet, index, op.i32Const, bytesPerStep, op.i32Add, op.localSet, index, op.br, 0],
    op.end,
    op.end,
  ];
  const splats = Array.from({ length: scalars }, (_, scalar) => [
    ...[op.localGet, scalarParameter(scalar), ...simd.f32x4Splat, op.localSet, splat(scalar)],
  ]).flat();
  const body = [
    ...splats,
    ...[op.i32Const, 0, op.localSet, index],
    // end = (count >>> 2) << 4: the bytes of the whole groups of four
    ...[op.localGet, count, op.i32Const, 2, op.i32ShrU, op.i32Const, 4, op.i32Shl, op.localSet, end],
    ...loop(vector, 16),
    // end = count << 2: every element's bytes
    ...[op.localGet, count, op.i32Const, 2, op.i32Shl, op.localSet, end],
    ...loop(scalar, 4),
    op.end,
  ];
  const temporaries = unsignedLeb(definition.temporaries);
  const locals = vectorOf(3, [
    ...[2, valueType.i32],
    ...[...unsignedLeb(scalars + definition.temporaries), valueType.v128],
    ...[...temporaries, valueType.f32],
  ]);
  const content = [...locals, ...body];
  return [...unsignedLeb(content.length), ...content];
}
