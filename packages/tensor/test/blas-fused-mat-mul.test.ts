import { type BackendName, computeInfo, initBackend, setNativeMatMul } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trackTensors } from './support/fixtures';

/**
 * The BLAS `_FusedMatMul` (tf.fused.matMul, every tfjs-layers Dense) against the backend's own
 * kernel with native matMul off: forward for every activation tfjs fuses, with and without bias,
 * transposed and batched, and gradients (tfjs fuses only 'linear' under a tape; the others run
 * unfused there, and are compared too). Tolerance: |native - backend| ≤ 1e-5 · (largest |backend|
 * of that tensor).
 */
const RELATIVE = 1e-5;

type Activation = 'linear' | 'relu' | 'relu6' | 'elu' | 'leakyrelu' | 'prelu' | 'sigmoid';
const activationNames: Activation[] = ['linear', 'relu', 'relu6', 'elu', 'leakyrelu', 'prelu', 'sigmoid'];

interface Case {
  name: string;
  a: number[];
  b: number[];
  transposeA?: boolean;
  transposeB?: boolean;
  /** Bias shape, or none. */
  bias?: number[];
  /** PReLU weight shape (default: one per output column). */
  prelu?: number[];
  /** tfjs 4.22's own fused gradient rejects a broadcast b (it returns b's gradient unreduced). */
  forwardOnly?: boolean;
}

const shapes: Case[] = [
  { name: '2-D, bias [N]', a: [33, 17], b: [17, 9], bias: [9] },
  { name: '2-D, no bias', a: [33, 17], b: [17, 9] },
  { name: 'transposed A, bias [1, N]', a: [17, 33], b: [17, 9], transposeA: true, bias: [1, 9] },
  { name: 'transposed B, scalar bias', a: [33, 17], b: [9, 17], transposeB: true, bias: [] },
  {
    name: 'both transposed, bias [M, N]',
    a: [17, 33],
    b: [9, 17],
    transposeA: true,
    transposeB: true,
    bias: [33, 9],
  },
  { name: 'batched, bias [N], scalar prelu', a: [4, 6, 5], b: [4, 5, 3], bias: [3], prelu: [1] },
  {
    name: 'batched, transposed B, bias [1, 1, N]',
    a: [2, 6, 5],
    b: [2, 3, 5],
    transposeB: true,
    bias: [1, 1, 3],
  },
  { name: 'batched, full bias', a: [3, 6, 5], b: [3, 5, 4], bias: [3, 6, 4], prelu: [3, 6, 4] },
  { name: 'broadcast b, bias [N]', a: [3, 6, 5], b: [5, 4], bias: [4], prelu: [3, 6, 4], forwardOnly: true },
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

/**
 * Value of tf.fused.matMul and the gradients of sum(weights ⊙ it) by every input. `unfused`
 * computes the same with separate ops: the reference where tfjs-backend-wasm 4.22's own kernel is
 * none. It accepts only a rank-1 bias (it throws on the others, which the BLAS kernel covers), and
 * on batched operands it returns wrong values (off by O(1) against cpu's kernel and the separate
 * ops here; the BLAS kernel matches both).
 */
function evaluate(testCase: Case, activation: Activation, seed: number, unfused = false): tf.Tensor[] {
  return tf.tidy(() => {
    const a = tf.randomNormal(testCase.a, 0, 1, 'float32', seed);
    const b = tf.randomNormal(testCase.b, 0, 1, 'float32', seed + 1);
    const bias =
      testCase.bias === undefined ? undefined : tf.randomNormal(testCase.bias, 0, 1, 'float32', seed + 2);
    const columns = testCase.transposeB === true ? testCase.b.at(-2)! : testCase.b.at(-1)!;
    const preluActivationWeights =
      activation === 'prelu'
        ? tf.randomUniform(testCase.prelu ?? [columns], 0, 0.5, 'float32', seed + 3)
        : undefined;
    const separate = (x: tf.Tensor, y: tf.Tensor, z?: tf.Tensor): tf.Tensor => {
      const product = tf.matMul(x, y, testCase.transposeA === true, testCase.transposeB === true);
      const biased = z === undefined ? product : tf.add(product, z);
      if (activation === 'linear') return biased;
      if (activation === 'prelu') return tf.prelu(biased, preluActivationWeights!);
      if (activation === 'leakyrelu') return tf.leakyRelu(biased, 0.3);
      const unary = { relu: tf.relu, relu6: tf.relu6, elu: tf.elu, sigmoid: tf.sigmoid }[activation];
      return unary(biased);
    };
    const f = (x: tf.Tensor, y: tf.Tensor, z?: tf.Tensor) =>
      unfused
        ? separate(x, y, z)
        : tf.fused.matMul({
            a: x,
            b: y,
            transposeA: testCase.transposeA === true,
            transposeB: testCase.transposeB === true,
            ...(z === undefined ? {} : { bias: z }),
            activation,
            ...(preluActivationWeights === undefined ? {} : { preluActivationWeights }),
            leakyreluAlpha: 0.3,
          });
    const value = f(a, b, bias);
    if (testCase.forwardOnly === true) return [value];
    const weights = tf.randomNormal(value.shape, 0, 1, 'float32', seed + 4);
    const inputs = bias === undefined ? [a, b] : [a, b, bias];
    const gradients = tf.grads((...xs: tf.Tensor[]) => tf.sum(tf.mul(f(xs[0]!, xs[1]!, xs[2]), weights)))(
      inputs,
    );
    return [value, ...gradients];
  });
}

/** The fused op on a Dense-like shape, and the same computation as separate ops. */
function fusedAndUnfused(): [tf.Tensor, tf.Tensor] {
  return tf.tidy(() => {
    const x = tf.randomNormal([16, 256], 0, 1, 'float32', 5);
    const w = tf.randomNormal([256, 64], 0, 0.1, 'float32', 6);
    const bias = tf.randomNormal([64], 0, 1, 'float32', 7);
    const fused = tf.fused.matMul({ a: x, b: w, bias, activation: 'relu' });
    return [fused, tf.relu(tf.add(tf.matMul(x, w), bias))];
  });
}

function bitwiseEqual(a: tf.Tensor, b: tf.Tensor): boolean {
  const x = new Uint32Array(a.dataSync().buffer.slice(0));
  const y = new Uint32Array(b.dataSync().buffer.slice(0));
  return x.length === y.length && x.every((word, index) => word === y[index]);
}

const backends: BackendName[] = ['cpu', 'wasm'];

describe.each(backends)('BLAS fused matMul on %s', (backend) => {
  let blas = false;
  beforeAll(async () => {
    await initBackend(backend);
    blas = (await setNativeMatMul(true)).matMul === 'blas';
    if (process.env.FSDP_EXPECT_BLAS === '1') expect(blas, computeInfo().reason ?? '').toBe(true);
  });
  afterAll(async () => {
    await setNativeMatMul(true);
  });

  for (const [shapeIndex, testCase] of shapes.entries()) {
    it(`matches the ${backend} kernel for every activation: ${testCase.name}`, async () => {
      const leaks = trackTensors();
      for (const [activationIndex, activation] of activationNames.entries()) {
        const seed = 100 * shapeIndex + 10 * activationIndex + 1;
        await setNativeMatMul(true);
        const native = evaluate(testCase, activation, seed);
        await setNativeMatMul(false);
        const wasmWrong =
          backend === 'wasm' &&
          ((testCase.bias !== undefined && testCase.bias.length !== 1) || testCase.a.length > 2);
        const reference = evaluate(testCase, activation, seed, wasmWrong);
        await setNativeMatMul(true);
        const names = ['value', 'gradient of a', 'gradient of b', 'gradient of bias'];
        expect(native).toHaveLength(reference.length);
        for (const [index, tensor] of native.entries())
          expectClose(tensor, reference[index]!, `${activation}: ${names[index]}`);
        tf.dispose([...native, ...reference]);
      }
      leaks.expectNoneLeft();
    });
  }

  it('runs as one _FusedMatMul kernel on sgemm when OpenBLAS loaded, tfjs’s kernel when off', async () => {
    const leaks = trackTensors();
    await setNativeMatMul(true);
    const profile = await tf.profile(() => tf.dispose(fusedAndUnfused()));
    const kernels = profile.kernelNames;
    expect(kernels).toContain('_FusedMatMul');
    // [Note: fused matMul epilogue] The native kernel is sgemm, then float32 bias and relu: bit for
    // bit the unfused ops on the native BatchMatMul. tfjs's cpu kernel runs tfjs's JavaScript
    // matMul, which sums in another order (bitwise different for K = 256).
    const [nativeFused, nativeUnfused] = fusedAndUnfused();
    await setNativeMatMul(false);
    const [backendFused, backendUnfused] = fusedAndUnfused();
    await setNativeMatMul(true);
    if (blas) {
      expect(bitwiseEqual(nativeFused, nativeUnfused)).toBe(true);
      expectClose(nativeFused, backendFused, 'native vs backend fused');
      if (backend === 'cpu') {
        expect(bitwiseEqual(backendFused, backendUnfused)).toBe(true);
        expect(bitwiseEqual(nativeFused, backendFused)).toBe(false);
      }
    }
    tf.dispose([nativeFused, nativeUnfused, backendFused, backendUnfused]);
    leaks.expectNoneLeft();
  });

  it('hands shapes it does not cover (a column bias [M, 1]) to tfjs’s kernel', async () => {
    const leaks = trackTensors();
    const run = () =>
      tf.tidy(() => {
        const x = tf.randomNormal([8, 5], 0, 1, 'float32', 11);
        const w = tf.randomNormal([5, 4], 0, 1, 'float32', 12);
        const bias = tf.randomNormal([8, 1], 0, 1, 'float32', 13);
        return [
          tf.fused.matMul({ a: x, b: w, bias, activation: 'elu' }),
          tf.elu(tf.add(tf.matMul(x, w), bias)),
        ];
      });
    await setNativeMatMul(true);
    if (backend === 'wasm') {
      // tfjs-backend-wasm's own kernel rejects it, and so it still does.
      expect(run).toThrow(/only supports rank-1 bias/);
    } else {
      const [native, reference] = run();
      const profile = await tf.profile(() => tf.dispose(run()));
      expect(profile.kernelNames).toContain('_FusedMatMul');
      expectClose(native!, reference!, 'column bias');
      tf.dispose([native!, reference!]);
    }
    leaks.expectNoneLeft();
  });
});
