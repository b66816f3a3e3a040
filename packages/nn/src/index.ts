/**
 * Modules, layers, a GPT, and the gradient entry point.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/nn
 */

// Build a model: the Module tree, its state dict and its forward hooks.

export type {
  ForwardHook,
  ForwardPreHook,
  ForwardWrapper,
  RemovableHandle,
} from './forward-hooks';
export { type LoadStateDictOptions, type LoadStateDictResult, Module, type StateDict } from './module';

// Layers and a GPT.

export { CausalSelfAttention, type CausalSelfAttentionOptions } from './layers/causal-self-attention';
export { Dropout, type DropoutOptions } from './layers/dropout';
export { Embedding, type EmbeddingOptions } from './layers/embedding';
export { erf, GELU, type GeluApproximation, gelu } from './layers/gelu';
export { GPT, type GPTConfig } from './layers/gpt';
export { LayerNorm, type LayerNormOptions, layerNorm } from './layers/layer-norm';
export { Linear, type LinearOptions } from './layers/linear';
export { MLP, type MLPOptions } from './layers/mlp';
export { ModuleList } from './layers/module-list';
export { TransformerBlock, type TransformerBlockOptions } from './layers/transformer-block';

// Compute a loss and its gradients into Parameter.grad.

export { backward } from './backward';
export { crossEntropy } from './functional/cross-entropy';

// Initialise parameters: eagerly from a seeded generator, or deferred until sharded.

export { deferredInit, isInitDeferred, materializeParameters } from './deferred-init';
export {
  constantParameter,
  GPT2_INIT_STD,
  initConstant,
  initNormal,
  initUniform,
  normalParameter,
} from './init';
export { ConstantInitializer, NormalInitializer } from './initializers';
export { defaultGenerator, Generator, type GeneratorState, manualSeed } from './random/generator';

// Write a layer or a wrapper: parameter tensors, the gradient hook, the random-state protocol.

export {
  type BackwardHookModule,
  type BackwardPlan,
  backwardHook,
  hasBackwardHook,
  trainableParameters,
} from './backward-hook';
export { parameterTensor, releaseStepTensors, withParameterTensors } from './parameter-scope';
export { isRandomStateful, type RandomStateful, randomStatefulModules } from './random/random-state';

// Errors.

export {
  NnError,
  type NnErrorCode,
  type NnErrorDetails,
  StateDictError,
  type StateDictShapeMismatch,
} from './errors';
