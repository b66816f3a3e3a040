import { spawnSync } from 'node:child_process';
import { type BackendName, computeInfo, initBackend, setNativeMatMul } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBlasSettings } from '../src/bridge/native/blas-settings';
import { trackTensors } from './support/fixtures';

/**
 * The BLAS kernel against the backend's own kernel, forward and gradient, for every matMul form
 * the project issues. Tolerance: |native - backend| ≤ 1e-5 · (largest |backend| of that tensor).
 * `.ci/run` sets FSDP_EXPECT_BLAS=1 after installing OpenBLAS, so CI fails if it did not load.
 */
const RELATIVE = 1e-5;

interface Case {
  name: string;
  a: number[];
  b: number[];
  transposeA?: boolean;
  transposeB?: boolean;
  /** Operands as the model makes them (e.g. slices of a larger tensor). */
  prepare?: (a: tf.Tensor, b: tf.Tensor) => [tf.Tensor, tf.Tensor];
  /** Tiles broadcast batch dims for the backend reference (wasm flattens batches, see below). */
  tileForReference?: [number[], number[]];
  /**
   * Empty products: the expected value and gradients are zeros of these shapes. The backend
   * kernels are no reference here: wasm 4.22 leaves a K = 0 product uninitialised and divides by
   * zero on an empty batch.
   */
  zeros?: number[];
}

const cases: Case[] = [
  { name: '2-D', a: [33, 17], b: [17, 9] },
  { name: 'transposed A', a: [17, 33], b: [17, 9], transposeA: true },
  { name: 'transposed B', a: [33, 17], b: [9, 17], transposeB: true },
  { name: 'both transposed', a: [17, 33], b: [9, 17], transposeA: true, transposeB: true },
  { name: 'batched', a: [4, 6, 5], b: [4, 5, 3] },
  { name: 'batched, transposed A', a: [4, 5, 6], b: [4, 5, 3], transposeA: true },
  { name: 'batched, transposed B', a: [2, 3, 6, 5], b: [2, 3, 3, 5], transposeB: true },
  { name: 'broadcast b (activations · weight)', a: [2, 7, 6, 5], b: [5, 3] },
  { name: 'broadcast b, transposed B', a: [3, 6, 5], b: [4, 5], transposeB: true },
  { name: 'broadcast a', a: [6, 5], b: [3, 5, 4] },
  {
    name: 'broadcast both ways',
    a: [3, 1, 6, 5],
    b: [1, 2, 5, 4],
    // tfjs-backend-wasm 4.22 flattens batch dims and mis-shapes this case; the reference tiles.
    tileForReference: [
      [1, 2, 1, 1],
      [3, 1, 1, 1],
    ],
  },
  { name: '1-row', a: [1, 64], b: [64, 32] },
  { name: '1-row, transposed B (lm head of one token)', a: [1, 64], b: [48, 64], transposeB: true },
  { name: 'zero rows', a: [0, 5], b: [5, 3], zeros: [0, 3] },
  { name: 'zero inner size', a: [4, 0], b: [0, 3], zeros: [4, 3] },
  { name: 'zero batch', a: [0, 4, 5], b: [5, 3], zeros: [0, 4, 3] },
  {
    name: 'row slice (offset into the source)',
    a: [40, 17],
    b: [17, 9],
    prepare: (a, b) => [tf.slice(a, [3, 0], [20, 17]), b],
  },
  {
    name: 'column slices, transposed',
    a: [17, 40],
    b: [12, 30],
    transposeA: true,
    transposeB: true,
    prepare: (a, b) => [tf.slice(a, [0, 5], [17, 33]), tf.slice(b, [2, 4], [9, 17])],
  },
];

function maxAbs(values: ArrayLike<number>): number {
  let largest = 0;
  for (let index = 0; index < values.length; index++) largest = Math.max(largest, Math.abs(values[index]!));
  return largest;
}

function expectClose(actual: tf.Tensor, expected: tf.Tensor, what: string): void {
  expect(actual.shape, what).toEqual(expected.shape);
  const a = actual.dataSync();
  const e = expected.dataSync();
  const allowed = RELATIVE * maxAbs(e) + 1e-30;
  let worst = 0;
  for (let index = 0; index < e.length; index++) worst = Math.max(worst, Math.abs(a[index]! - e[index]!));
  expect(worst, `${what}: worst |native - backend| vs allowed ${allowed}`).toBeLessThanOrEqual(allowed);
}

/** Forward value and gradients of sum(weights ⊙ op(a)·op(b)) for one case. */
function evaluate(testCase: Case, seed: number, tile: boolean): tf.Tensor[] {
  return tf.tidy(() => {
    let a = tf.randomNormal(testCase.a, 0, 1, 'float32', seed);
    let b = tf.randomNormal(testCase.b, 0, 1, 'float32', seed + 1);
    const ta = testCase.transposeA === true;
    const tb = testCase.transposeB === true;
    const f = (x: tf.Tensor, y: tf.Tensor) => {
      const [left, right] =
        tile && testCase.tileForReference !== undefined
          ? [tf.tile(x, testCase.tileForReference[0]), tf.tile(y, testCase.tileForReference[1])]
          : [x, y];
      return tf.matMul(left, right, ta, tb);
    };
    if (testCase.prepare !== undefined) [a, b] = testCase.prepare(a, b);
    const value = f(a, b);
    const weights = tf.randomNormal(value.shape, 0, 1, 'float32', seed + 2);
    const gradients = tf.grads((x: tf.Tensor, y: tf.Tensor) => tf.sum(tf.mul(f(x, y), weights)))([a, b]);
    return [value, ...gradients];
  });
}

const backends: BackendName[] = ['wasm', 'cpu'];

describe.each(backends)('BLAS matMul on %s', (backend) => {
  let blas = false;
  beforeAll(async () => {
    await initBackend(backend);
    blas = (await setNativeMatMul(true)).matMul === 'blas';
  });
  afterAll(async () => {
    await setNativeMatMul(true);
  });

  it('loads when CI installed OpenBLAS, and reports what runs', () => {
    const info = computeInfo();
    expect(info.backend).toBe(backend);
    if (process.env.FSDP_EXPECT_BLAS === '1') {
      expect(info.matMul, info.reason ?? '').toBe('blas');
      expect(info.blasThreads).toBe(1);
    }
    expect(info.summary).toContain(backend);
    if (info.matMul === 'blas') expect(info.reason).toBeNull();
    else expect(info.reason).toMatch(/no BLAS library loaded|disabled/);
  });

  for (const [index, testCase] of cases.entries()) {
    it(`matches the ${backend} kernel, forward and gradients: ${testCase.name}`, async () => {
      const leaks = trackTensors();
      await setNativeMatMul(true);
      const native = evaluate(testCase, 10 * index + 1, false);
      const usedBlas = computeInfo().matMul === 'blas';
      await setNativeMatMul(false);
      const reference =
        testCase.zeros === undefined
          ? evaluate(testCase, 10 * index + 1, true)
          : [tf.zeros(testCase.zeros), tf.zeros(testCase.a), tf.zeros(testCase.b)];
      await setNativeMatMul(true);
      expect(usedBlas).toBe(blas);
      expectClose(native[0]!, reference[0]!, 'value');
      expectClose(native[1]!, reference[1]!, 'gradient of a');
      expectClose(native[2]!, reference[2]!, 'gradient of b');
      tf.dispose([...native, ...reference]);
      leaks.expectNoneLeft();
    });
  }

  it('rejects mismatched inner sizes with a typed error', () => {
    if (!blas) return;
    expect(() => tf.matMul(tf.zeros([2, 3]), tf.zeros([4, 5]))).toThrow(/inner sizes differ: 3 and 4/);
  });
});

describe('BLAS settings', () => {
  it('defaults to one thread and reads the switches', () => {
    expect(readBlasSettings({})).toEqual({ enabled: true, library: null, threads: 1 });
    expect(
      readBlasSettings({ FSDP_BLAS: 'off', FSDP_BLAS_LIBRARY: '/x.so', FSDP_BLAS_THREADS: '2' }),
    ).toEqual({
      enabled: false,
      library: '/x.so',
      threads: 2,
    });
  });

  it('rejects a bad thread count or switch and says how to fix it', () => {
    expect(() => readBlasSettings({ FSDP_BLAS_THREADS: 'two' })).toThrow(/positive integer|thread count/);
    expect(() => readBlasSettings({ FSDP_BLAS: 'maybe' })).toThrow(/FSDP_BLAS=off/);
  });

  it('trains on wasm when FSDP_BLAS_LIBRARY cannot load, and the notice names the fix', () => {
    const fixture = new URL('./fixtures/train-without-blas.ts', import.meta.url).pathname;
    const result = spawnSync(process.execPath, ['--conditions=@fsdp-ts/source', '--import', 'tsx', fixture], {
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, FSDP_BLAS_LIBRARY: '/nonexistent/libopenblas.so.0', FSDP_BLAS: '' },
    });
    expect(result.status, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout.trim().split('\n').at(-1)!) as {
      matMul: string;
      reason: string;
      losses: number[];
    };
    expect(report.matMul).toBe('backend');
    expect(report.reason).toContain('/nonexistent/libopenblas.so.0');
    expect(report.losses.at(-1)!).toBeLessThan(0.5 * report.losses[0]!);
    const notices = result.stderr
      .split('\n')
      .filter((line) => line.includes('apt-get install libopenblas0-pthread'));
    expect(notices).toHaveLength(1);
    expect(notices[0]).toContain('FSDP_BLAS_LIBRARY=/nonexistent/libopenblas.so.0 did not load');
  });
});
