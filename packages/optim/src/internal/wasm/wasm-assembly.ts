/**
 * What the package's hand-assembled WebAssembly modules share: the opcodes they use, LEB128,
 * vectors, sections and names (see the WebAssembly core specification, "Binary Format").
 */
export const op = {
  block: 0x02,
  loop: 0x03,
  end: 0x0b,
  br: 0x0c,
  brIf: 0x0d,
  localGet: 0x20,
  localSet: 0x21,
  localTee: 0x22,
  i32Const: 0x41,
  i32GeU: 0x4f,
  i32Add: 0x6a,
} as const;

/** The value types of local declarations and function types. */
export const valueType = { i32: 0x7f, f32: 0x7d, f64: 0x7c, v128: 0x7b } as const;

export const simd = (code: number): number[] => [0xfd, ...unsignedLeb(code)];

export const f32x4 = {
  splat: simd(0x13),
  sqrt: simd(0xe3),
  add: simd(0xe4),
  sub: simd(0xe5),
  mul: simd(0xe6),
  div: simd(0xe7),
  max: simd(0xe9),
};

export const f64x2 = {
  add: simd(0xf0),
  mul: simd(0xf2),
  /** Lanes 0 and 1 of an f32x4, widened. */
  promoteLow: simd(0x5f),
};

/** i8x16.shuffle taking bytes 8..15 of the first operand into lanes 0..7 (the high two floats low). */
export const highHalfToLow = [...simd(0x0d), 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15];

/** v128.load / v128.store at a constant byte offset from the address on the stack (align 2^4). */
export const load = (offset: number): number[] => [...simd(0x00), 4, ...unsignedLeb(offset)];
export const store = (offset: number): number[] => [...simd(0x0b), 4, ...unsignedLeb(offset)];

export function unsignedLeb(value: number): number[] {
  const bytes: number[] = [];
  do {
    let byte = value & 0x7f;
    value >>>= 7;
    if (value !== 0) byte |= 0x80;
    bytes.push(byte);
  } while (value !== 0);
  return bytes;
}

export function vector(items: number[]): number[] {
  return [...unsignedLeb(items.length), ...items];
}

export function section(id: number, content: number[]): number[] {
  return [id, ...unsignedLeb(content.length), ...content];
}

export function name(text: string): number[] {
  return vector([...text].map((character) => character.charCodeAt(0)));
}

/** The module header: magic and version 1. */
export const MODULE_HEADER = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
