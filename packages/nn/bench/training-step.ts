/**
 * The reference GPT's training step shared by the benchmark and the profiler: forward, backward
 * and an inline AdamW over the Parameter views (the optim package is separate).
 */
import type { Parameter } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { backward, crossEntropy, GPT, type GPTConfig } from '../src/index';

export const referenceConfig = {
  vocabSize: 256,
  dModel: 256,
  nLayers: 4,
  nHeads: 4,
  seqLen: 128,
  tieEmbeddings: true,
  seed: 0,
} satisfies GPTConfig;

/** Inline AdamW, weight decay 0.01, updating in place over the Parameter views. */
function makeAdamW(list: readonly Parameter[], lr: number): () => void {
  const moments = list.map((parameter) => ({
    first: new Float32Array(parameter.numel),
    second: new Float32Array(parameter.numel),
  }));
  let step = 0;
  return () => {
    step += 1;
    const correction1 = 1 - 0.9 ** step;
    const correction2 = 1 - 0.999 ** step;
    list.forEach((parameter, index) => {
      if (parameter.grad === null) return;
      const data = parameter.data.typedArray() as Float32Array;
      const grad = parameter.grad.typedArray() as Float32Array;
      const { first, second } = moments[index]!;
      for (let element = 0; element < data.length; element++) {
        const g = grad[element]!;
        first[element] = 0.9 * first[element]! + 0.1 * g;
        second[element] = 0.999 * second[element]! + 0.001 * g * g;
        const update = first[element]! / correction1 / (Math.sqrt(second[element]! / correction2) + 1e-8);
        data[element] = data[element]! * (1 - lr * 0.01) - lr * update;
        grad[element] = 0;
      }
    });
  };
}

export interface TrainingStep {
  /** One step; returns the loss. */
  run(): number;
  parameterCount: number;
  /** FLOPs of one step's matMuls (dense layers and attention), 2 per multiply-add. */
  flopsPerStep: number;
  tokensPerStep: number;
  dispose(): void;
}

export function makeTrainingStep(config: GPTConfig, batch: number, seqLen: number): TrainingStep {
  const model = new GPT(config);
  const parameters = model.parameters();
  const optimizerStep = makeAdamW(parameters, 3e-4);
  // A fixed batch of tokens; the task does not matter for throughput (the PyTorch script uses the same).
  const tokenValues = Int32Array.from(
    { length: batch * seqLen },
    (_, index) => (index * 7919) % config.vocabSize,
  );
  const tokens = tf.tensor(tokenValues, [batch, seqLen], 'int32');
  const targets = tf.tensor(
    tokenValues.map((value) => (value + 1) % config.vocabSize),
    [batch, seqLen],
    'int32',
  );
  const { dModel, nLayers, vocabSize } = config;
  const tokensPerStep = batch * seqLen;
  // Dense layers: 6 FLOPs per parameter per token (forward 2, backward 4). Attention: q·kᵀ and
  // p·v, each B·T·T·D multiply-adds per layer forward, twice that backward.
  const denseParameters = nLayers * 12 * dModel * dModel + vocabSize * dModel;
  const attentionFlops = nLayers * 3 * 2 * 2 * batch * seqLen * seqLen * dModel;
  return {
    run() {
      const loss = backward(model, () => crossEntropy(model.forward(tokens), targets));
      optimizerStep();
      return loss;
    },
    parameterCount: parameters.reduce((sum, parameter) => sum + parameter.numel, 0),
    flopsPerStep: 6 * denseParameters * tokensPerStep + attentionFlops,
    tokensPerStep,
    dispose() {
      tokens.dispose();
      targets.dispose();
    },
  };
}
