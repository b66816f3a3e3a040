/**
 * The few pieces of the WebAssembly binary format nn's SIMD modules need (see
 * [Note: SIMD loops on the tfjs heap]): LEB128 integers, vectors, sections, names, float
 * constants and the opcodes those modules use. Nothing here validates: the engine does, when the
 * module is compiled.
 */
export function unsignedLeb(value: number): number[] {
  const bytes: number[] = [];
  let rest = value >>> 0;
  do {
    let byte = rest & 0x7f;
    rest >>>= 7;
    if (rest !== 0) byte |= 0x80;
    bytes.push(byte);
  } while (rest !== 0);
  return bytes;
}

/** A length-prefixed sequence (already encoded items, `count` of them). */
export function vectorOf(count: number, items: readonly number[]): number[] {
  return [...unsignedLeb(count), ...items];
}

export function section(id: number, content: readonly number[]): number[] {
  return [id, ...unsignedLeb(content.length), ...content];
}

export function nameBytes(text: string): number[] {
  const bytes = [...new TextEncoder().encode(text)];
  return vectorOf(bytes.length, bytes);
}

/** The four little-endian bytes of `value` rounded to float32. */
export function float32Bytes(value: number): number[] {
  return [...new Uint8Array(Float32Array.of(value).buffer)];
}

export const valueType = { i32: 0x7f, f32: 0x7d, v128: 0x7b } as const;

export const sectionId = { type: 1, import: 2, function: 3, export: 7, code: 10 } as const;

export const opcode = {
  block: 0x02,
  loop: 0x03,
  end: 0x0b,
  br: 0x0c,
  brIf: 0x0d,
  localGet: 0x20,
  localSet: 0x21,
  localTee: 0x22,
  f32Load: 0x2a,
  f32Store: 0x38,
  i32Const: 0x41,
  f32Const: 0x43,
  i32GeU: 0x4f,
  i32Add: 0x6a,
  i32Shl: 0x74,
  i32ShrU: 0x76,
  f32Add: 0x92,
  f32Sub: 0x93,
  f32Mul: 0x94,
  emptyBlockType: 0x40,
} as const;

/** 128-bit SIMD instructions (prefix 0xfd, then the LEB128 sub-opcode). */
const simd = (code: number) => [0xfd, ...unsignedLeb(code)];
export const simdOpcode = {
  v128Load: simd(0x00),
  v128Store: simd(0x0b),
  v128Const: simd(0x0c),
  f32x4Splat: simd(0x13),
  f32x4Add: simd(0xe4),
  f32x4Sub: simd(0xe5),
  f32x4Mul: simd(0xe6),
} as const;
