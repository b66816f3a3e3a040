/**
 * Optimizers over Parameter views (full, sharded or empty), param groups, LR schedules.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/optim
 */
export { Adam, type AdamOptions, AdamW, adamDefaults, adamWDefaults } from './adam';
export { OptimError, type OptimErrorCode, type OptimErrorDetails } from './errors';
export { LAMB, type LAMBConstructorOptions, type LAMBOptions, lambDefaults } from './lamb';
export { LARS, type LARSConstructorOptions, type LARSOptions, larsDefaults } from './lars';
export type { NormReductionGroup, NormReductionWork } from './norm-reduction-group';
export { Optimizer, type PreparedParameter } from './optimizer';
export type {
  BaseOptions,
  HyperparameterValue,
  ParamGroup,
  ParamGroupInput,
  ParamsInput,
  ZeroGradOptions,
} from './param-group';
export { LambdaLR, type LRLambda } from './schedules/lambda-lr';
export { LinearWarmupCosineLR, type LinearWarmupCosineLROptions } from './schedules/linear-warmup-cosine-lr';
export { LRScheduler, type LRSchedulerStateDict, type SchedulableOptimizer } from './schedules/lr-scheduler';
export { StepLR, type StepLROptions } from './schedules/step-lr';
export { SGD, type SGDOptions, sgdDefaults } from './sgd';
export type {
  OptimizerStateDict,
  ParameterStateEntry,
  SavedParamGroup,
  StateDictOptions,
} from './state-dict';
