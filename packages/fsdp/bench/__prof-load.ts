import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initProcessGroup, spawnThreadRanks } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel, loadCheckpoint, saveCheckpoint } from '@fsdp-ts/fsdp';
import { backward, crossEntropy, GPT, TransformerBlock } from '@fsdp-ts/nn';
import { AdamW } from '@fsdp-ts/optim';
import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';

const config = { vocabSize: 4096, dModel: 512, nLayers: 2, nHeads: 8, seqLen: 16, seed: 1 };
export async function rank({ args }: { rank: number; args: { root: string } }) {
  await initBackend('cpu');
  const group = await initProcessGroup();
  const model = new FullyShardedDataParallel(new GPT(config), { group, autoWrapPolicy: [TransformerBlock] });
  const optimizer = new AdamW(model.parameters(), { lr: 1e-3 });
  const tokens = tf.tensor2d([[1, 2, 3, 4, 5, 6, 7, 8]], [1, 8], 'int32');
  backward(model, () => crossEntropy(model.forward(tokens) as tf.Tensor, tokens));
  optimizer.step();
  let t = performance.now();
  const saved = saveCheckpoint(args.root, { model, optimizer, step: 1 });
  const out: string[] = [`save ${(performance.now() - t).toFixed(0)} bytes ${saved.bytes}`];
  t = performance.now();
  const sd = optimizer.stateDict();
  out.push(`stateDict ${(performance.now() - t).toFixed(0)}`);
  t = performance.now();
  optimizer.loadStateDict(sd);
  out.push(`loadStateDict ${(performance.now() - t).toFixed(0)}`);
  t = performance.now();
  loadCheckpoint(saved.path, { model });
  out.push(`load params only ${(performance.now() - t).toFixed(0)}`);
  t = performance.now();
  loadCheckpoint(saved.path, { model, optimizer });
  out.push(`load all ${(performance.now() - t).toFixed(0)}`);
  await group.destroy();
  return out.join('; ');
}
if (process.argv[1]?.endsWith('prof-load.ts'))
  console.log(
    await spawnThreadRanks(1, new URL(import.meta.url), 'rank', {
      args: { root: mkdtempSync(join(tmpdir(), 'prof-')) },
      timeoutMs: 600000,
    }),
  );
