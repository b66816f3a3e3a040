import * as tfl from '@tensorflow/tfjs-layers';
import { classCount, imageSize } from './digits';

/**
 * A small CNN: two conv blocks (the first with batch norm), then a softmax classifier. Batch
 * norm's momentum is 0.9, not tfjs's default 0.99: the example trains for about 64 steps, after
 * which 0.99 still leaves half of the initial variance (1) in the moving statistics (about 20x
 * the real variance here), so the validation accuracy of a run would depend on its seed more than
 * on its training.
 */
export function buildModel(): tfl.LayersModel {
  const model = tfl.sequential({
    layers: [
      tfl.layers.conv2d({ inputShape: [imageSize, imageSize, 1], filters: 8, kernelSize: 3, useBias: false }),
      tfl.layers.batchNormalization({ momentum: 0.9 }),
      tfl.layers.activation({ activation: 'relu' }),
      tfl.layers.maxPooling2d({ poolSize: 2 }),
      tfl.layers.conv2d({ filters: 16, kernelSize: 3, activation: 'relu' }),
      tfl.layers.maxPooling2d({ poolSize: 2 }),
      tfl.layers.flatten(),
      tfl.layers.dense({ units: 32, activation: 'relu' }),
      tfl.layers.dense({ units: classCount, activation: 'softmax' }),
    ],
  });
  model.compile({ optimizer: 'adam', loss: 'categoricalCrossentropy', metrics: ['accuracy'] });
  return model;
}
