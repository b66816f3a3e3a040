/**
 * The whole stack in one import: what a training script calls, as the README, the guides and the
 * examples use it. Everything else stays in its own package (`@fsdp-ts/tensor`,
 * `@fsdp-ts/collectives`, ...), which a script can import beside this one; the list is curated
 * (architecture/decisions/2026-12-02-public-surfaces.md) and its names are committed in
 * `test/public-exports.txt`.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module fsdp-ts
 */

// Pick the compute backend.

export {
  type BackendName,
  type ComputeInfo,
  computeInfo,
  currentBackend,
  initBackend,
} from '@fsdp-ts/tensor';

// Start a process group, run collectives, start ranks.

export {
  allocateShared,
  type CollectiveDtype,
  fsdpRunCommand,
  type InitProcessGroupOptions,
  initProcessGroup,
  newGroup,
  type ProcessEnvironment,
  ProcessGroup,
  type ReduceOp,
  readEnvironment,
  restartRequested,
  type SpawnThreadRanksOptions,
  spawnThreadRanks,
  type ThreadRankArguments,
  Work,
} from '@fsdp-ts/collectives';

// Build a model: modules, layers, a GPT, the loss and its gradients, initialisation.

export {
  backward,
  CausalSelfAttention,
  crossEntropy,
  Dropout,
  deferredInit,
  Embedding,
  GELU,
  Generator,
  GPT,
  type GPTConfig,
  LayerNorm,
  Linear,
  MLP,
  Module,
  ModuleList,
  manualSeed,
  materializeParameters,
  type StateDict,
  TransformerBlock,
} from '@fsdp-ts/nn';

// Parameters and the views over storage they live in.

export { type DType, Parameter, Storage, TensorView, toTf } from '@fsdp-ts/tensor';

// Optimize: optimizers, param groups, learning-rate schedules.

export {
  Adam,
  AdamW,
  LAMB,
  LARS,
  LambdaLR,
  LinearWarmupCosineLR,
  LRScheduler,
  Optimizer,
  type OptimizerStateDict,
  type ParamGroupInput,
  SGD,
  StepLR,
} from '@fsdp-ts/optim';

// Wrap a model: the wrapper and its options, strategies, clipping, full parameters, memory.

export {
  type AutoWrapPolicy,
  clipGradNorm,
  estimateMemoryPerRank,
  FSDP,
  type FsdpOptions,
  FullyShardedDataParallel,
  hybridShardGroups,
  type MemoryEstimate,
  type MixedPrecision,
  type ShardingPreset,
  type ShardingStrategy,
  shardingPresets,
  shardingStrategies,
  smallestFittingWorldSize,
  summonFullParams,
} from '@fsdp-ts/fsdp';

// Save and load: checkpoints, resuming, state dicts, safetensors.

export {
  exportSafetensors,
  findLatestCheckpoint,
  fullOptimStateDict,
  fullStateDict,
  importSafetensors,
  type LoadCheckpointOptions,
  listCheckpoints,
  loadCheckpoint,
  loadFullOptimStateDict,
  loadFullStateDict,
  loadShardedOptimStateDict,
  loadShardedStateDict,
  type ResumePoint,
  resumeOrStart,
  type SaveCheckpointOptions,
  saveCheckpoint,
  shardedOptimStateDict,
  shardedStateDict,
} from '@fsdp-ts/fsdp';

// Errors: every package's class shares one base, FsdpTsError.

export { CollectiveError } from '@fsdp-ts/collectives';
export { FsdpTsError } from '@fsdp-ts/errors';
export { FlatParamError } from '@fsdp-ts/flat-param';
export { CheckpointError, FsdpError } from '@fsdp-ts/fsdp';
export { NnError, StateDictError } from '@fsdp-ts/nn';
export { OptimError } from '@fsdp-ts/optim';
export { StorageFreedError, TensorError } from '@fsdp-ts/tensor';
