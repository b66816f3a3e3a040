import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as tf from '@tensorflow/tfjs-core';

const scheme = 'file://';

/**
 * A `file://` save handler writing the layout tfjs-node's file system handler writes
 * (`model.json` with a weights manifest pointing at `weights.bin`, and `weights.bin`), for when
 * no `file://` handler is registered (plain tfjs without tfjs-node). The result loads with
 * `tf.loadLayersModel('file://dir/model.json')` under tfjs-node, or with plain tfjs through
 * `tf.io.fromMemory` after reading the two files.
 */
export function resolveSaveTarget(target: tf.io.IOHandler | string): tf.io.IOHandler | string {
  if (typeof target !== 'string' || !target.startsWith(scheme)) return target;
  if (tf.io.getSaveHandlers(target).length > 0) return target;
  const directory = target.slice(scheme.length);
  return tf.io.withSaveHandler(async (artifacts) => {
    mkdirSync(directory, { recursive: true });
    const weightData =
      artifacts.weightData === undefined
        ? new ArrayBuffer(0)
        : tf.io.CompositeArrayBuffer.join(artifacts.weightData);
    writeFileSync(join(directory, 'weights.bin'), new Uint8Array(weightData));
    const modelJson: Record<string, unknown> = {
      modelTopology: artifacts.modelTopology,
      format: artifacts.format,
      generatedBy: artifacts.generatedBy,
      convertedBy: artifacts.convertedBy,
      weightsManifest: [{ paths: ['weights.bin'], weights: artifacts.weightSpecs ?? [] }],
    };
    if (artifacts.trainingConfig !== undefined) modelJson.trainingConfig = artifacts.trainingConfig;
    if (artifacts.userDefinedMetadata !== undefined)
      modelJson.userDefinedMetadata = artifacts.userDefinedMetadata;
    const json = JSON.stringify(modelJson);
    writeFileSync(join(directory, 'model.json'), json);
    return {
      modelArtifactsInfo: {
        dateSaved: new Date(),
        modelTopologyType: 'JSON',
        modelTopologyBytes: JSON.stringify(artifacts.modelTopology).length,
        weightSpecsBytes: JSON.stringify(artifacts.weightSpecs ?? []).length,
        weightDataBytes: weightData.byteLength,
      },
    };
  });
}
