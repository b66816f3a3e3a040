import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import {
  blasCandidates,
  blasSearchOrder,
  F32,
  F32X4_ADD,
  FUNCTION_TYPE,
  functionBody,
  get,
  I32,
  instantiate,
  load,
  loadBlas,
  loadNativeFloatAdd,
  memoryImport,
  name,
  SINGLE_THREAD_ELEMENTS,
  section,
  signedLeb,
  simd,
  store,
  unsignedLeb,
  wasmModule,
} from '../src/index';

describe('the WebAssembly encoder', () => {
  it('writes LEB128 numbers as the specification does', () => {
    expect(unsignedLeb(0)).toEqual([0]);
    expect(unsignedLeb(127)).toEqual([0x7f]);
    expect(unsignedLeb(128)).toEqual([0x80, 0x01]);
    expect(unsignedLeb(624_485)).toEqual([0xe5, 0x8e, 0x26]);
    expect(unsignedLeb(65_536)).toEqual([0x80, 0x80, 0x04]);
    expect(signedLeb(-1)).toEqual([0x7f]);
    expect(signedLeb(63)).toEqual([0x3f]);
    expect(signedLeb(64)).toEqual([0xc0, 0x00]);
    expect(signedLeb(-123_456)).toEqual([0xc0, 0xbb, 0x78]);
  });

  it('writes sections, names and memory imports byte for byte', () => {
    expect(section(7, [1, 2, 3])).toEqual([7, 3, 1, 2, 3]);
    expect(name('env')).toEqual([3, 0x65, 0x6e, 0x76]);
    const prefix = [...name('env'), ...name('memory'), 0x02];
    expect(memoryImport({ minimumPages: 0 })).toEqual([...prefix, 0x00, 0]);
    expect(memoryImport({ minimumPages: 1, maximumPages: 2 })).toEqual([...prefix, 0x01, 1, 2]);
    expect(memoryImport({ minimumPages: 0, maximumPages: 65_536, shared: true })).toEqual([
      ...prefix,
      0x03,
      0,
      0x80,
      0x80,
      0x04,
    ]);
  });

  it('assembles a SIMD module that runs: four float32 lanes added in memory', () => {
    // add(address): memory[address .. +16) += memory[address + 16 .. +32) as f32x4.
    const bytes = wasmModule([
      [1, [1, FUNCTION_TYPE, 1, I32, 0]],
      [3, [1, 0]],
      [5, [1, 0x00, 1]],
      [7, [2, ...name('memory'), 0x02, 0, ...name('add'), 0x00, 0]],
      [
        10,
        [
          1,
          ...functionBody(
            [0],
            [...get(0), ...get(0), ...load(0), ...get(0), ...load(16), ...simd(F32X4_ADD), ...store(0)],
          ),
        ],
      ],
    ]);
    const exported = instantiate(bytes);
    expect(exported).not.toBeNull();
    const memory = new Float32Array((exported!.memory as { buffer: ArrayBuffer }).buffer, 0, 8);
    memory.set([1, 2, 3, 4, 0.5, 0.25, -3, 1e30]);
    (exported!.add as (address: number) => void)(0);
    expect(Array.from(memory.subarray(0, 4))).toEqual([1.5, 2.25, 0, Math.fround(4 + 1e30)]);
    expect(F32).toBe(0x7d);
  });

  it('gives null for bytes that are not a module, so callers take their scalar loops', () => {
    expect(instantiate(Uint8Array.of(0, 1, 2))).toBeNull();
  });
});

const openBlasInstalled = blasSearchOrder.some(
  (candidate) => candidate.startsWith('/') && existsSync(candidate),
);

describe('the OpenBLAS loader', () => {
  it('FSDP_BLAS_LIBRARY is the only candidate when set', () => {
    expect(blasCandidates({ FSDP_BLAS_LIBRARY: '/opt/blas.so' })).toEqual(['/opt/blas.so']);
    expect(blasCandidates({})).toBe(blasSearchOrder);
  });

  it('names each candidate that failed, and never throws', () => {
    const load = loadBlas(['/nonexistent/libopenblas.so.0']);
    expect(load.loaded).toBe(false);
    if (load.loaded) return;
    expect(load.tried).toEqual(['/nonexistent/libopenblas.so.0']);
    expect(load.reason).toContain('/nonexistent/libopenblas.so.0');
    expect(loadNativeFloatAdd(undefined)).toEqual({ add: undefined, reason: 'koffi is not available' });
  });

  it.runIf(openBlasInstalled)(
    'loads every CBLAS call; the reduce steps add bit for bit as float32 adds',
    () => {
      const load = loadBlas();
      expect(load.loaded, load.loaded ? '' : load.reason).toBe(true);
      if (!load.loaded) return;
      expect(load.library.config).toMatch(/OpenBLAS/);
      const koffiPath = createRequire(import.meta.url).resolve('koffi');
      const loaded = loadNativeFloatAdd(koffiPath);
      expect(loaded.add?.library).toBe(load.library.path);
      const length = 2 * SINGLE_THREAD_ELEMENTS + 7;
      const target = Float32Array.from({ length }, (_, index) => Math.fround(Math.sin(index) * 1e3));
      const incoming = Float32Array.from({ length }, (_, index) => Math.fround(Math.cos(index) / 3));
      const expected = target.map((value, index) => Math.fround(value + incoming[index]!));
      loaded.add!.addInto(target, incoming);
      expect(target).toEqual(expected);
      loaded.add!.scale(target, 0.25);
      expect(target).toEqual(expected.map((value) => value / 4));
    },
  );
});
