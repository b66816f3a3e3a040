// The seed scenario as a user writes it against the installed packages (copied into a fresh app by
// installed-app.int.test.ts; not part of the monorepo's own build). Run: fsdp-run --nproc-per-node 2 train.ts
import { initProcessGroup } from '@fsdp-ts/collectives';
import { FullyShardedDataParallel } from '@fsdp-ts/fsdp';
import { backward, crossEntropy, Linear, Module } from '@fsdp-ts/nn';
import { SGD } from '@fsdp-ts/optim';
import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import * as umbrella from 'fsdp-ts';

class Model extends Module {
  layer = this.registerModule('layer', new Linear(5, 5));
  head = this.registerModule('head', new Linear(5, 3));
  forward(x: tf.Tensor) {
    return this.head.forward(tf.tanh(this.layer.forward(x)));
  }
}

const backend = await initBackend();
const group = await initProcessGroup();
const inner = new Model();
const layerObjects = inner.layer.parameters();
const model = new FullyShardedDataParallel(inner, { group, autoWrapPolicy: [Linear] });
const sameParameters = model.module.layer
  .parameters()
  .every((parameter, index) => parameter === layerObjects[index]);
const headBefore = model.module.head.parameters().map((parameter) => parameter.data.toArray());
const layerBefore = model.module.layer.parameters().map((parameter) => parameter.data.toArray());
const optimizer = new SGD(model.module.layer.parameters(), { lr: 2 }); // trains `layer` only
// Seed rank + 1: tfjs treats a seed of 0 as none, which made rank 0's data differ run to run.
const x = tf.randomNormal([8, 5], 0, 1, 'float32', group.rank + 1);
const y = tf.tensor1d([0, 1, 2, 0, 1, 2, 0, 1], 'int32');
const losses: number[] = [];
for (let step = 0; step < 8; step++) {
  losses.push(backward(model, () => crossEntropy(model.forward(x), y)));
  optimizer.step();
  optimizer.zeroGrad();
}
const headUnchanged = model.module.head
  .parameters()
  .every(
    (parameter, index) => JSON.stringify(parameter.data.toArray()) === JSON.stringify(headBefore[index]),
  );
const layerChanged = model.module.layer
  .parameters()
  .some(
    (parameter, index) => JSON.stringify(parameter.data.toArray()) !== JSON.stringify(layerBefore[index]),
  );
console.log(
  `result ${JSON.stringify({
    rank: group.rank,
    backend,
    sameParameters,
    headUnchanged,
    layerChanged,
    losses,
    umbrellaIsSame: umbrella.FullyShardedDataParallel === FullyShardedDataParallel,
  })}`,
);
tf.dispose([x, y]);
await group.destroy();
