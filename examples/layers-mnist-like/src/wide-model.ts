import * as tfl from '@tensorflow/tfjs-layers';
import { classCount, imageSize } from './digits';

/**
 * The benchmark's compute-bound model: an MLP on the same 16×16 digits with two wide hidden
 * layers (`hidden` units each; 1024 gives 1.32 M parameters), so that with a large global batch
 * the matrix products, not the per-step fixed costs, take most of a step.
 */
export function buildWideModel(hidden: number): tfl.LayersModel {
  const model = tfl.sequential({
    layers: [
      tfl.layers.flatten({ inputShape: [imageSize, imageSize, 1] }),
      tfl.layers.dense({ units: hidden, activation: 'relu' }),
      tfl.layers.dense({ units: hidden, activation: 'relu' }),
      tfl.layers.dense({ units: classCount, activation: 'softmax' }),
    ],
  });
  model.compile({ optimizer: 'adam', loss: 'categoricalCrossentropy', metrics: ['accuracy'] });
  return model;
}
