/**
 * The small WebAssembly assembler the package's SIMD kernels are written with
 * (bfloat16-simd.ts, shm/reduce-simd.ts): LEB128 numbers, the v128 load/store/local helpers,
 * sections, instruction fragments every kernel uses (i32 constants, counters, the loop), and
 * instantiation where WebAssembly SIMD is available. The opcodes are named in wasm-opcodes.ts.
 * (optim has its own: collectives and optim do not depend on each other.)
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
} from './wasm-opcodes.js';

export const I32 = 0x7f;
export const F32 = 0x7d;
export const V128 = 0x7b;

/** An unsigned LEB128 number. */
export function unsigned(value: number): number[] {
  const bytes: number[] = [];
  do {
    let byte = value & 0x7f;
    value >>>= 7;
    if (value !== 0) byte |= 0x80;
    bytes.push(byte);
  } while (value !== 0);
  return bytes;
}

/** A signed LEB128 number. */
export function signed(value: number): number[] {
  const bytes: number[] = [];
  for (;;) {
    const byte = value & 0x7f;
    value >>= 7;
    const done = (value === 0 && (byte & 0x40) === 0) || (value === -1 && (byte & 0x40) !== 0);
    bytes.push(done ? byte : byte | 0x80);
    if (done) return bytes;
  }
}

/** A SIMD instruction (0xfd prefix) by its opcode. */
export const simd = (opcode: number): number[] => [SIMD_PREFIX, ...unsigned(opcode)];
/** v128.load / v128.store at a constant offset from the address on the stack (alignment 1). */
export const load = (offset: number): number[] => [...simd(V128_LOAD), 0, ...unsigned(offset)];
export const store = (offset: number): number[] => [...simd(V128_STORE), 0, ...unsigned(offset)];
export const get = (local: number): number[] => [LOCAL_GET, local];

/** i32.const `value`. */
export const constant = (value: number): number[] => [I32_CONST, ...signed(value)];
/** `local += amount` (i32). */
export const increment = (local: number, amount: number): number[] => [
  ...get(local),
  ...constant(amount),
  I32_ADD,
  LOCAL_SET,
  local,
];

/** `while (counter < limit) body` (unsigned i32 locals); `body` moves the counter on itself. */
export function loopWhileBelow(counter: number, limit: number, body: number[]): number[] {
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

/** A name in the export section. */
export function text(value: string): number[] {
  return [...unsigned(value.length), ...Array.from(value, (character) => character.charCodeAt(0))];
}

/** A function body: its local declarations, its code and `end`, prefixed by its size. */
export function functionBody(locals: number[], body: number[]): number[] {
  const code = [...locals, ...body, END];
  return [...unsigned(code.length), ...code];
}

/**
 * The import section's contents for one import, env.memory: a shared memory (limits flag 3) of
 * 1 page minimum and `maximumPages` maximum (instantiate with `{ env: { memory } }`).
 */
export const sharedMemoryImport = (maximumPages: number): number[] => [
  1,
  ...text('env'),
  ...text('memory'),
  0x02,
  0x03,
  1,
  ...unsigned(maximumPages),
];

/** A module from its sections, each given as [id, contents]. */
export function wasmModule(sections: [id: number, contents: number[]][]): Uint8Array {
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    ...sections.flatMap(([id, contents]) => [id, ...unsigned(contents.length), ...contents]),
  ]);
}

/** The part of the WebAssembly API used here (the project's tsconfig has no DOM library). */
interface WasmApi {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: Record<string, unknown> };
}

/** The module's exports, or null where WebAssembly (or its SIMD, or shared memory) is unavailable. */
export function instantiate(bytes: Uint8Array, imports: object = {}): Record<string, unknown> | null {
  const wasm = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;
  if (wasm === undefined || !wasm.validate(bytes)) return null;
  return new wasm.Instance(new wasm.Module(bytes), imports).exports;
}
