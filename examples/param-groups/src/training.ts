import { backward, crossEntropy, type Module } from '@fsdp-ts/nn';
import { AdamW, SGD } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { samples, type TaggerModel } from './tagger-model';

/** The groups whose updates the example reports, in table order. */
export const groupNames = ['encoder', 'decoder', 'head', 'embedding (frozen)'] as const;

export interface StepReport {
  loss: number;
  /** Per group: the squared norm of this process's part of the update (sum over ranks = total). */
  squaredUpdateNorms: number[];
}

/**
 * The seed scenario's optimizers, built from submodules' parameters() (after wrapping, when
 * wrapped): AdamW with one param group per submodule (different lr and weight decay) over the
 * encoder and decoder, and a separate SGD with momentum for the head. The embedding is frozen and
 * in no optimizer.
 */
export function buildOptimizers(model: TaggerModel) {
  const adamw = new AdamW([
    { params: model.encoder.parameters(), lr: 3e-3, weightDecay: 0.1 },
    { params: model.decoder.parameters(), lr: 1e-3, weightDecay: 0 },
  ]);
  const sgd = new SGD(model.head.parameters(), { lr: 0.05, momentum: 0.9 });
  return { adamw, sgd };
}

function snapshot(parameters: readonly Parameter[]): Float32Array[] {
  return parameters.map((parameter) => Float32Array.from(parameter.data.toArray()));
}

function squaredDistance(parameters: readonly Parameter[], before: Float32Array[]): number {
  let total = 0;
  parameters.forEach((parameter, index) => {
    const now = parameter.data.toArray();
    const then = before[index]!;
    for (let element = 0; element < now.length; element++) total += (now[element]! - then[element]!) ** 2;
  });
  return total;
}

/**
 * Trains `steps` steps on samples [first, first + count) of each step. `trained` is the module
 * backward() differentiates and `forward` its forward (the FSDP wrapper, or the bare model);
 * `inner` is the bare model whose submodules' parameters() feed the optimizers.
 */
export function train(
  trained: Module,
  forward: (tokens: tf.Tensor) => tf.Tensor,
  inner: TaggerModel,
  steps: number,
  first: number,
  count: number,
): StepReport[] {
  const { adamw, sgd } = buildOptimizers(inner);
  const groups = [
    inner.encoder.parameters(),
    inner.decoder.parameters(),
    inner.head.parameters(),
    inner.embedding.parameters(),
  ];
  const reports: StepReport[] = [];
  for (let step = 0; step < steps; step++) {
    const { tokens, targets } = samples(step, first, count);
    const loss = backward(trained, () => crossEntropy(forward(tokens), targets));
    tf.dispose([tokens, targets]);
    const before = groups.map(snapshot);
    adamw.step();
    sgd.step();
    adamw.zeroGrad();
    sgd.zeroGrad();
    reports.push({
      loss,
      squaredUpdateNorms: groups.map((parameters, index) => squaredDistance(parameters, before[index]!)),
    });
  }
  return reports;
}
