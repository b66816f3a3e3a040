/**
 * The one WebAssembly encoder of fsdp-ts: every SIMD kernel of collectives, optim and nn is
 * assembled with it from the named opcodes of wasm-opcodes.ts (no toolchain at build or install
 * time, no binary in the packages). It writes the binary format of the WebAssembly core
 * specification ("Binary Format"): LEB128 numbers, vectors, sections and names, the v128
 * load/store/local helpers, the instruction fragments most kernels share (i32 constants,
 * counters, the loop), and instantiation where WebAssembly SIMD is available. Nothing here
 * validates a module: the engine does, when `instantiate` compiles it.
 *
 * [Note: one WebAssembly encoder] The kernels are written as TypeScript that emits bytes, not as
 * `.wat` sources assembled at build time: the modules are small (a few hundred instructions),
 * many are generated from tables (six reducers times three variants, a loop per element-wise
 * function), and their layouts are computed from constants the JavaScript side shares (region
 * offsets, block sizes), which a `.wat` file would have to repeat. So tests run from source with
 * no build step and the published packages need no assembler.
 */

import {
  BLOCK,
  BR,
  BR_IF,
  EMPTY_BLOCK,
  END,
  I32_ADD,
  I32_CONST,
  I32_GE_U,
  LOCAL_GET,
  LOCAL_SET,
  LOOP,
  SIMD_PREFIX,
  V128_LOAD,
  V128_STORE,
} from './wasm-opcodes';

/** Value types, of locals and of function types. */
export const I32 = 0x7f;
export const F32 = 0x7d;
export const F64 = 0x7c;
export const V128 = 0x7b;
/** The form byte that starts a function type. */
export const FUNCTION_TYPE = 0x60;

/** Section ids. */
export const sectionId = { type: 1, import: 2, function: 3, memory: 5, export: 7, code: 10 } as const;

/** The module header: magic and version 1. */
export const MODULE_HEADER: readonly number[] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];

/** An unsigned LEB128 number (of a 32-bit value). */
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

/** A signed LEB128 number. */
export function signedLeb(value: number): number[] {
  const bytes: number[] = [];
  for (;;) {
    const byte = value & 0x7f;
    value >>= 7;
    const done = (value === 0 && (byte & 0x40) === 0) || (value === -1 && (byte & 0x40) !== 0);
    bytes.push(done ? byte : byte | 0x80);
    if (done) return bytes;
  }
}

/** The four little-endian bytes of `value` rounded to float32 (an f32.const's immediate). */
export function float32Bytes(value: number): number[] {
  return [...new Uint8Array(Float32Array.of(value).buffer)];
}

/** A vector of single-byte items: their count, then the items. */
export function vector(items: readonly number[]): number[] {
  return [...unsignedLeb(items.length), ...items];
}

/** A vector of `count` items already encoded (each may be several bytes). */
export function vectorOf(count: number, items: readonly number[]): number[] {
  return [...unsignedLeb(count), ...items];
}

/** A section: its id, its size, its contents. */
export function section(id: number, contents: readonly number[]): number[] {
  return [id, ...unsignedLeb(contents.length), ...contents];
}

/** A name (of an import or an export): its UTF-8 bytes as a vector. */
export function name(value: string): number[] {
  return vector([...new TextEncoder().encode(value)]);
}

/** A module from its sections, each given as [id, contents]. */
export function wasmModule(
  sections: readonly (readonly [id: number, contents: readonly number[]])[],
): Uint8Array {
  return Uint8Array.from([...MODULE_HEADER, ...sections.flatMap(([id, contents]) => section(id, contents))]);
}

/** A function body: its local declarations, its code and `end`, prefixed by its size. */
export function functionBody(locals: readonly number[], body: readonly number[]): number[] {
  const code = [...locals, ...body, END];
  return [...unsignedLeb(code.length), ...code];
}

/** A SIMD instruction (0xfd prefix) by its opcode. */
export const simd = (opcode: number): number[] => [SIMD_PREFIX, ...unsignedLeb(opcode)];

/**
 * v128.load / v128.store at a constant offset from the address on the stack; `alignment` is the
 * log2 hint (0: byte-aligned, 4: 16-byte-aligned), which engines may use but never check.
 */
export const load = (offset: number, alignment = 0): number[] => [
  ...simd(V128_LOAD),
  alignment,
  ...unsignedLeb(offset),
];
export const store = (offset: number, alignment = 0): number[] => [
  ...simd(V128_STORE),
  alignment,
  ...unsignedLeb(offset),
];

/** local.get `local`. */
export const get = (local: number): number[] => [LOCAL_GET, local];

/** i32.const `value`. */
export const constant = (value: number): number[] => [I32_CONST, ...signedLeb(value)];

/** `local += amount` (i32). */
export const increment = (local: number, amount: number): number[] => [
  ...get(local),
  ...constant(amount),
  I32_ADD,
  LOCAL_SET,
  local,
];

/** `while (counter < limit) body` (unsigned i32 locals); `body` moves the counter on itself. */
export function loopWhileBelow(counter: number, limit: number, body: readonly number[]): number[] {
  return [
    BLOCK,
    EMPTY_BLOCK,
    LOOP,
    EMPTY_BLOCK,
    ...get(counter),
    ...get(limit),
    I32_GE_U,
    BR_IF,
    1,
    ...body,
    BR,
    0,
    END,
    END,
  ];
}

/**
 * One import, env.memory, as an import entry: a memory of `minimumPages`, with `maximumPages`
 * when given, shared (limits flag 3, which needs a maximum) when `shared` (instantiate with
 * `{ env: { memory } }`).
 */
export function memoryImport(limits: {
  minimumPages: number;
  maximumPages?: number;
  shared?: boolean;
}): number[] {
  const { minimumPages, maximumPages, shared = false } = limits;
  const flags = shared ? 0x03 : maximumPages === undefined ? 0x00 : 0x01;
  const maximum = maximumPages === undefined ? [] : unsignedLeb(maximumPages);
  return [...name('env'), ...name('memory'), 0x02, flags, ...unsignedLeb(minimumPages), ...maximum];
}

/** The import section's contents for env.memory alone, shared, of 1 page up to `maximumPages`. */
export const sharedMemoryImport = (maximumPages: number): number[] => [
  1,
  ...memoryImport({ minimumPages: 1, maximumPages, shared: true }),
];

/** A WebAssembly.Memory, as far as the kernels use one. */
export interface WasmMemory {
  readonly buffer: ArrayBufferLike;
}

/** The part of the WebAssembly JavaScript API the kernels use (the tsconfig has no DOM library). */
export interface WebAssemblyApi {
  validate(bytes: Uint8Array): boolean;
  Memory: abstract new (...args: never[]) => WasmMemory;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> };
}

/** The engine's WebAssembly namespace, or undefined where there is none. */
export function webAssembly(): WebAssemblyApi | undefined {
  return (globalThis as { WebAssembly?: WebAssemblyApi }).WebAssembly;
}

/**
 * The module's exports, or null where WebAssembly (or its SIMD, or shared memory) is unavailable
 * or the module does not instantiate with `imports` (the caller then runs its scalar loops).
 */
export function instantiate(bytes: Uint8Array, imports: object = {}): Record<string, unknown> | null {
  const wasm = webAssembly();
  if (wasm === undefined || !wasm.validate(bytes)) return null;
  try {
    return new wasm.Instance(new wasm.Module(bytes), imports).exports;
  } catch {
    return null;
  }
}
