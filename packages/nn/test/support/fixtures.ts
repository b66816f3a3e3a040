import { type BackendName, initBackend, type Parameter, setNativeMatMul } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';

/** Every test file runs its suite on each of these. */
export const backends: BackendName[] = ['cpu', 'wasm'];

/** Each backend with the BLAS matMul kernel on (when a library loads) and off. */
export const backendSettings: { backend: BackendName; native: boolean }[] = backends.flatMap((backend) => [
  { backend, native: true },
  { backend, native: false },
]);

export async function useBackend(name: BackendName, nativeMatMul = true): Promise<void> {
  await initBackend(name);
  await setNativeMatMul(nativeMatMul);
  if (tf.getBackend() !== name) throw new Error(`expected backend ${name}, got ${tf.getBackend()}`);
}

/**
 * Largest violation of |actual - expected| <= relative · max(|expected|, floor), as a ratio (<= 1
 * passes), with the index where it happens. Used for every parity check in these tests.
 */
export function worstRelativeError(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  relative: number,
  floor: number,
): { ratio: number; index: number } {
  if (actual.length !== expected.length) throw new Error(`length ${actual.length} vs ${expected.length}`);
  let worst = { ratio: 0, index: -1 };
  for (let index = 0; index < expected.length; index++) {
    const allowed = relative * Math.max(Math.abs(expected[index]!), floor);
    const ratio = Math.abs(actual[index]! - expected[index]!) / allowed;
    if (!(ratio <= worst.ratio)) worst = { ratio, index };
  }
  return worst;
}

/** Minimal AdamW (decoupled weight decay), written inline for tests; steps every Parameter with a grad. */
export class InlineAdamW {
  private step = 0;
  private readonly moments = new Map<Parameter, { first: Float32Array; second: Float32Array }>();

  constructor(
    private readonly parameters: readonly Parameter[],
    private readonly options: {
      lr: number;
      beta1?: number;
      beta2?: number;
      epsilon?: number;
      weightDecay?: number;
    },
  ) {}

  update(): void {
    const { lr, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, weightDecay = 0.01 } = this.options;
    this.step += 1;
    const correction1 = 1 - beta1 ** this.step;
    const correction2 = 1 - beta2 ** this.step;
    for (const parameter of this.parameters) {
      if (parameter.grad === null) continue;
      const data = parameter.data.typedArray() as Float32Array;
      const grad = parameter.grad.typedArray() as Float32Array;
      let moment = this.moments.get(parameter);
      if (moment === undefined) {
        moment = { first: new Float32Array(data.length), second: new Float32Array(data.length) };
        this.moments.set(parameter, moment);
      }
      const { first, second } = moment;
      for (let index = 0; index < data.length; index++) {
        const g = grad[index]!;
        first[index] = beta1 * first[index]! + (1 - beta1) * g;
        second[index] = beta2 * second[index]! + (1 - beta2) * g * g;
        const update = first[index]! / correction1 / (Math.sqrt(second[index]! / correction2) + epsilon);
        data[index] = data[index]! * (1 - lr * weightDecay) - lr * update;
      }
    }
  }

  zeroGrad(): void {
    for (const parameter of this.parameters) parameter.grad?.fill(0);
  }
}
