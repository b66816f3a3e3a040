import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { afterAll, describe, expect, it } from 'vitest';
import { makeData } from './fixtures/models';

const fixture = new URL('./fixtures/save-run.ts', import.meta.url);
const directory = mkdtempSync(join(tmpdir(), 'fsdp-layers-save-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/** Loads a model.json + weights.bin directory with plain tfjs (no fsdp-ts code). */
async function loadPlain(path: string): Promise<tfl.LayersModel> {
  const modelJson = JSON.parse(readFileSync(join(path, 'model.json'), 'utf8')) as tf.io.ModelJSON;
  const artifacts = await tf.io.getModelArtifactsForJSON(modelJson, async (manifest) => {
    const data = readFileSync(join(path, manifest[0]!.paths[0]!));
    return [
      manifest.flatMap((group) => group.weights),
      data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength),
    ];
  });
  return tfl.loadLayersModel(tf.io.fromMemory(artifacts));
}

describe('ShardedTrainer.save', () => {
  it('writes, from rank 0 only, a model that plain tf.loadLayersModel loads and that predicts the same', async () => {
    const predictions = (await spawnThreadRanks(2, fixture, 'saveRank', {
      args: { directory },
      timeoutMs: 90_000,
    })) as number[][];
    expect(predictions[1]).toEqual(predictions[0]);
    expect(readdirSync(directory).sort()).toEqual(['model.json', 'weights.bin']);
    await initBackend('cpu');
    const loaded = await loadPlain(directory);
    const output = Array.from((loaded.predict(makeData('cnn', 5, 500).x) as tf.Tensor).dataSync());
    expect(output).toHaveLength(predictions[0]!.length);
    output.forEach((value, index) => {
      expect(Math.abs(value - predictions[0]![index]!)).toBeLessThanOrEqual(1e-6);
    });
  });
});
