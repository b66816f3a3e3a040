/**
 * Modules, layers, a GPT, and the gradient entry point.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/nn
 */
export { backward } from './backward';
export {
  type BackwardHookModule,
  type BackwardPlan,
  backwardHook,
  hasBackwardHook,
  trainableParameters,
} from './backward-hook';
export { deferredInit, isInitDeferred, materializeParameters } from './deferred-init';
export {
  NnError,
  type NnErrorCode,
  type NnErrorDetails,
  StateDictError,
  type StateDictShapeMismatch,
} from './errors';
export type {
  ForwardHook,
  ForwardPreHook,
  ForwardWrapper,
  RemovableHandle,
} from './forward-hooks';
export { crossEntropy } from './functional/cross-entropy';
export {
  constantParameter,
  GPT2_INIT_STD,
  initConstant,
  initNormal,
  initUniform,
  normalParameter,
} from './init';
export { ConstantInitializer, NormalInitializer } from './initializers';
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
export { type LoadStateDictOptions, type LoadStateDictResult, Module, type StateDict } from './module';
export { parameterTensor, withParameterTensors } from './parameter-scope';
export { defaultGenerator, Generator, type GeneratorState, manualSeed } from './random/generator';
export { isRandomStateful, type RandomStateful, randomStatefulModules } from './random/random-state';
