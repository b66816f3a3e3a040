import { type BackendName, initBackend, setNativeMatMul } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import * as layers from '@tensorflow/tfjs-layers';
import { afterAll, describe, expect, it } from 'vitest';
import { trackTensors } from './support/fixtures';

/**
 * tfjs-layers' Dense runs `_FusedMatMul`: a short fit and a predict with the BLAS kernels give
 * what tfjs's own kernels give. Tolerance: losses within 1e-4 relative (five steps of float32
 * rounding in another summation order), predictions within 1e-5 of the largest |value|.
 */
function buildModel(): layers.Sequential {
  const model = layers.sequential({
    layers: [
      layers.layers.dense({
        units: 48,
        activation: 'relu',
        inputShape: [20],
        kernelInitializer: layers.initializers.glorotUniform({ seed: 1 }),
        biasInitializer: layers.initializers.randomNormal({ seed: 2 }),
      }),
      layers.layers.dense({
        units: 24,
        activation: 'elu',
        kernelInitializer: layers.initializers.glorotUniform({ seed: 3 }),
        biasInitializer: layers.initializers.randomNormal({ seed: 4 }),
      }),
      layers.layers.dense({
        units: 5,
        activation: 'softmax',
        kernelInitializer: layers.initializers.glorotUniform({ seed: 5 }),
      }),
    ],
  });
  model.compile({ optimizer: tf.train.sgd(0.1), loss: 'categoricalCrossentropy' });
  return model;
}

async function trainAndPredict(): Promise<{ losses: number[]; prediction: Float32Array; kernels: string[] }> {
  const model = buildModel();
  const x = tf.randomNormal([64, 20], 0, 1, 'float32', 7);
  const labels = tf.tidy(() => tf.oneHot(tf.randomUniform([64], 0, 5, 'int32', 8), 5));
  const history = await model.fit(x, labels, { epochs: 5, batchSize: 16, shuffle: false, verbose: 0 });
  const profile = await tf.profile(() => tf.dispose(model.predict(x) as tf.Tensor));
  const predicted = model.predict(x) as tf.Tensor;
  const prediction = predicted.dataSync() as Float32Array;
  tf.dispose([x, labels, predicted]);
  model.optimizer.dispose();
  model.dispose();
  return { losses: history.history.loss as number[], prediction, kernels: profile.kernelNames };
}

const backends: BackendName[] = ['cpu', 'wasm'];

describe.each(backends)('tfjs-layers Dense on %s with the BLAS kernels', (backend) => {
  afterAll(async () => {
    await setNativeMatMul(true);
  });

  it('fits and predicts as with tfjs’s kernels', async () => {
    await initBackend(backend);
    const leaks = trackTensors();
    await setNativeMatMul(true);
    const native = await trainAndPredict();
    await setNativeMatMul(false);
    const reference = await trainAndPredict();

    await setNativeMatMul(true);
    expect(native.kernels).toContain('_FusedMatMul');
    expect(native.losses).toHaveLength(5);
    expect(native.losses.at(-1)!).toBeLessThan(native.losses[0]!);
    for (const [epoch, loss] of native.losses.entries())
      expect(Math.abs(loss - reference.losses[epoch]!), `epoch ${epoch}`).toBeLessThanOrEqual(
        1e-4 * Math.abs(reference.losses[epoch]!),
      );
    let worst = 0;
    for (const [index, value] of native.prediction.entries())
      worst = Math.max(worst, Math.abs(value - reference.prediction[index]!));
    expect(worst).toBeLessThanOrEqual(1e-5);
    leaks.expectNoneLeft();
  });
});
