/**
 * The reference GPT's training step shared by the benchmark and the profiler: forward, backward,
 * then @fsdp-ts/optim's AdamW (lr 3e-4, weight decay 0.01: torch.optim.AdamW's defaults as the
 * PyTorch script uses them) and zeroGrad, as a user would write it. zeroGrad keeps the grads and
 * zero-fills them, as PyTorch 1.13's `zero_grad()` does by default (ZERO_GRAD=null sets them to
 * null instead, which allocates fresh grads every step: see [Note: reading gradients]).
 */
import { AdamW } from '@fsdp-ts/optim';
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

export interface TrainingStep {
  /** One step; returns the loss. */
  run(): number;
  parameterCount: number;
  /** FLOPs of one step's matMuls (dense layers and attention), 2 per multiply-add. */
  flopsPerStep: number;
  tokensPerStep: number;
  dispose(): void;
}

const setToNull = process.env.ZERO_GRAD === 'null';

export function makeTrainingStep(config: GPTConfig, batch: number, seqLen: number): TrainingStep {
  const model = new GPT(config);
  const parameters = model.parameters();
  const optimizer = new AdamW(parameters, { lr: 3e-4, weightDecay: 0.01 });
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
      optimizer.step();
      optimizer.zeroGrad({ setToNull });
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
