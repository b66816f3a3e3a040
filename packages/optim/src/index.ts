/**
 * Optimizers over Parameter views (full, sharded or empty), param groups, LR schedules.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/optim
 */

// Pick an optimizer.

export { Adam, type AdamOptions, AdamW, adamDefaults, adamWDefaults } from './adam';
export { LAMB, type LAMBConstructorOptions, type LAMBOptions, lambDefaults } from './lamb';
export { LARS, type LARSConstructorOptions, type LARSOptions, larsDefaults } from './lars';
export { SGD, type SGDOptions, sgdDefaults } from './sgd';

// Give parts of a model their own hyperparameters (param groups), or write an optimizer; LAMB and
// LARS reduce whole-parameter norms over a NormReductionGroup (a ProcessGroup fits).

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
export type { OffloadedStateEntry, OptimizerStateOffload } from './state-offload';

// Schedule the learning rate.

export { LambdaLR, type LRLambda } from './schedules/lambda-lr';
export { LinearWarmupCosineLR, type LinearWarmupCosineLROptions } from './schedules/linear-warmup-cosine-lr';
export { LRScheduler, type LRSchedulerStateDict, type SchedulableOptimizer } from './schedules/lr-scheduler';
export { StepLR, type StepLROptions } from './schedules/step-lr';

// Save and load optimizer state.

export type {
  OptimizerStateDict,
  ParameterStateEntry,
  SavedParamGroup,
  StateDictOptions,
} from './state-dict';

// Errors.

export { OptimError, type OptimErrorCode, type OptimErrorDetails } from './errors';
