import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { ForeignNames, OptionKeys } from '@fsdp-ts/errors';
import type { Module } from '@fsdp-ts/nn';
import { FsdpError } from './errors';
import { resolveHybridGroups } from './hybrid-shard';
import { checkFsdpOptionKeys } from './internal/check-option-keys';
import type { MixedPrecision } from './mixed-precision';
import { checkMixedPrecisionKeys, resolveMixedPrecision } from './mixed-precision';
import { type OffloadOptions, type OffloadSettings, resolveOffload } from './offload/offload-settings';
import {
  resolveShardingPreset,
  type ShardingPreset,
  type ShardingSettings,
  type ShardingStrategy,
  shardingSettings,
} from './sharding-strategy';
import { type AutoWrapPolicy, checkWrapPolicyKeys } from './wrap-policy';

/** Options of FullyShardedDataParallel. */
export interface FsdpOptions {
  /**
   * The process group to shard over. Required, except for 'hybrid-shard' given `shardGroup` and
   * `replicateGroup`. With 'hybrid-shard' and `shardGroupSize`, the whole group (use
   * `await FullyShardedDataParallel.create(...)`, which builds the sub-groups).
   */
  group?: ProcessGroup;
  /** 'hybrid-shard': ranks per shard group (consecutive ranks of `group`); needs `create()`. */
  shardGroupSize?: number;
  /** 'hybrid-shard': the group this rank shards over. */
  shardGroup?: ProcessGroup;
  /** 'hybrid-shard': the group of this rank's replicas (same shard rank in every shard group). */
  replicateGroup?: ProcessGroup;
  /** Gather parameters and/or reduce gradients in bfloat16 (shards stay float32). Default: off. */
  mixedPrecision?: MixedPrecision;
  /** A built-in preset by name (default 'full-shard'), or a ShardingPreset (see sharding-strategy.ts). */
  shardingStrategy?: ShardingStrategy | ShardingPreset;
  /** Which submodules become their own units; the root unit takes what is left. Default: none. */
  autoWrapPolicy?: AutoWrapPolicy;
  /**
   * Activation checkpointing: the (non-root) units whose forward keeps only its inputs and is run
   * again in backward, trading about one extra forward for activation memory. `true` for every
   * unit, or a policy like autoWrapPolicy evaluated on each unit's module. Default false: units
   * keep their activations (their gathered parameters are still released after forward under
   * full-shard, see [Note: released parameters]).
   */
  activationCheckpointing?: boolean | AutoWrapPolicy;
  /**
   * Default true: each unit's parameters live in one flat buffer (one all-gather and one
   * reduce-scatter per unit). false: every parameter is its own communication unit (kept to
   * measure the flat-vs-unflat difference).
   */
  flattenParameters?: boolean;
  /** Issue the next unit's all-gather when a unit's backward starts. Default true. */
  backwardPrefetch?: boolean;
  /**
   * Issue the next unit's all-gather when a unit's forward starts (the first unit's when the root's
   * starts). Default true: a synchronous runtime cannot run ahead of its compute the way PyTorch's
   * CPU thread runs ahead of the GPU, so without it every unit's forward waits for its whole
   * all-gather. Within `limitAllGathers`.
   */
  forwardPrefetch?: boolean;
  /**
   * At most one prefetched all-gather in flight, so at most two non-root units gathered at once
   * (the running one and the next): bounds memory. Default true. See [Note: in-flight all-gathers].
   */
  limitAllGathers?: boolean;
  /** Modules whose parameters FSDP leaves alone (not sharded, not reduced). */
  ignoredModules?: readonly Module[];
  /** Broadcast rank 0's parameter values to every rank at construction. Default false. */
  syncModuleStates?: boolean;
  /** Alignment (elements) of each parameter in a flat buffer. Default 4 (16 bytes). */
  alignment?: number;
  /**
   * Keep the optimizer state in host memory apart from the model or on disk, stepped a chunk at a
   * time (DeepSpeed's offload_optimizer device cpu / nvme); see OffloadOptions. Attach the
   * optimizer with `model.offloadOptimizerState(optimizer)`. Default: nothing offloaded.
   */
  offload?: OffloadOptions;
}

/** The keys of FsdpOptions, checked at run time ([Note: option keys] in @fsdp-ts/errors). */
export const fsdpOptionKeys = {
  group: true,
  shardGroupSize: true,
  shardGroup: true,
  replicateGroup: true,
  mixedPrecision: true,
  shardingStrategy: true,
  autoWrapPolicy: true,
  activationCheckpointing: true,
  flattenParameters: true,
  backwardPrefetch: true,
  forwardPrefetch: true,
  limitAllGathers: true,
  ignoredModules: true,
  syncModuleStates: true,
  alignment: true,
  offload: true,
} as const satisfies OptionKeys<FsdpOptions>;

/** PyTorch FSDP's constructor arguments (and FSDP2 `fully_shard`'s), with what fsdp-ts calls them. */
export const pytorchFsdpNames: ForeignNames = {
  process_group:
    "PyTorch's process_group is group here: { group: await initProcessGroup() }; for hybrid sharding, shardGroup and replicateGroup (or shardGroupSize with FullyShardedDataParallel.create)",
  device_mesh:
    'no device_mesh here: pass group, or for hybrid sharding shardGroup and replicateGroup (or group and shardGroupSize with FullyShardedDataParallel.create)',
  sharding_strategy:
    "PyTorch's sharding_strategy is shardingStrategy here, with the values 'full-shard', 'shard-grad-op', 'no-shard' and 'hybrid-shard' (ShardingStrategy.FULL_SHARD is 'full-shard')",
  auto_wrap_policy:
    "PyTorch's auto_wrap_policy is autoWrapPolicy here: an array of module classes ([TransformerBlock], as transformer_auto_wrap_policy), { minNumParams: n } (as size_based_auto_wrap_policy) or (module, name) => boolean",
  use_orig_params:
    'no such option: fsdp-ts always keeps the original Parameters as views into the flat buffers (what use_orig_params=True gives in PyTorch), so an optimizer may hold any subset of them; remove it',
  cpu_offload:
    "PyTorch's cpu_offload is offload here: { optimizerState: 'memory' | 'disk', directory } keeps the optimizer state off the rank's memory (gradients stay in the process)",
  offload_policy: "FSDP2's offload_policy is offload here: { optimizerState: 'memory' | 'disk', directory }",
  mixed_precision:
    "PyTorch's mixed_precision is mixedPrecision here: { paramDtype: 'bfloat16', reduceDtype: 'bfloat16' } (communication dtypes; shards and compute stay float32)",
  mp_policy: "FSDP2's mp_policy is mixedPrecision here: { paramDtype: 'bfloat16', reduceDtype: 'bfloat16' }",
  backward_prefetch:
    "PyTorch's backward_prefetch is backwardPrefetch here: a boolean (default true, which is BackwardPrefetch.BACKWARD_PRE)",
  forward_prefetch: "PyTorch's forward_prefetch is forwardPrefetch here: a boolean (default true)",
  limit_all_gathers: "PyTorch's limit_all_gathers is limitAllGathers here: a boolean (default true)",
  sync_module_states: "PyTorch's sync_module_states is syncModuleStates here: a boolean (default false)",
  ignored_modules: "PyTorch's ignored_modules is ignoredModules here: an array of Modules",
  ignored_states: "PyTorch's ignored_states is ignoredModules here: an array of Modules",
  device_id:
    'no equivalent: each process computes on the tfjs backend initBackend() picked, with no device to choose; remove it',
  param_init_fn:
    "no such option: build the model inside deferredInit(() => new Model(...)) from @fsdp-ts/nn and wrap it; each unit's shard is initialised directly",
  state_dict_type:
    'no such option: call fullStateDict(model) or shardedStateDict(model) (and fullOptimStateDict / shardedOptimStateDict) for FULL_STATE_DICT or SHARDED_STATE_DICT',
  reshard_after_forward:
    "FSDP2's reshard_after_forward is a preset here: shardingStrategy 'full-shard' (true) or 'shard-grad-op' (false)",
  activation_checkpointing_policy:
    'activationCheckpointing here: true for every unit, or a policy like autoWrapPolicy',
};

/** FsdpOptions resolved once into the settings the runtime reads. */
export interface ResolvedFsdpOptions {
  /** The group parameters are sharded over (the shard group under 'hybrid-shard'). */
  readonly group: ProcessGroup;
  /** 'hybrid-shard': the replica group gradients are all-reduced over; otherwise null. */
  readonly replicateGroup: ProcessGroup | null;
  readonly mixedPrecision: Required<MixedPrecision> | null;
  /** The strategy's name (a built-in ShardingStrategy, or a custom preset's name). */
  readonly shardingStrategy: string;
  /** What the runtime reads (see [Note: strategies are presets]). */
  readonly sharding: ShardingSettings;
  readonly autoWrapPolicy: AutoWrapPolicy | undefined;
  readonly activationCheckpointing: boolean | AutoWrapPolicy;
  readonly flattenParameters: boolean;
  readonly backwardPrefetch: boolean;
  readonly forwardPrefetch: boolean;
  readonly limitAllGathers: boolean;
  readonly ignoredModules: readonly Module[];
  readonly syncModuleStates: boolean;
  readonly alignment: number;
  /** What is offloaded, and where (see offload-settings.ts). */
  readonly offload: OffloadSettings;
}

export function resolveOptions(options: FsdpOptions): ResolvedFsdpOptions {
  checkFsdpOptions(options);
  const hybrid = resolveHybridGroups(options);
  if (options === undefined || (options.group === undefined && hybrid === null)) {
    throw new FsdpError('FullyShardedDataParallel needs a process group.', {
      code: 'invalid-option',
      expected: '{ group: ProcessGroup }',
      actual: options,
      fix: 'pass { group: await initProcessGroup() }.',
    });
  }
  const preset = resolveShardingPreset(options.shardingStrategy);
  const alignment = options.alignment ?? 4;
  if (!Number.isInteger(alignment) || alignment < 1) {
    throw new FsdpError(`alignment must be a positive integer; got ${alignment}.`, {
      code: 'invalid-option',
      expected: 'an integer >= 1',
      actual: alignment,
    });
  }
  const offload = resolveOffload(options.offload);
  if (offload.optimizerState !== 'none' && hybrid !== null) {
    throw new FsdpError("offload is not supported with 'hybrid-shard' yet.", {
      code: 'invalid-option',
      expected: "shardingStrategy 'full-shard', 'shard-grad-op' or 'no-shard' with offload",
      actual: preset.name,
      fix: "use 'full-shard' over the whole group with offload, or drop offload.",
    });
  }
  return {
    offload,
    group: hybrid?.shardGroup ?? options.group!,
    replicateGroup: hybrid?.replicateGroup ?? null,
    sharding: shardingSettings(preset, hybrid?.replicateGroup ?? null),
    mixedPrecision: resolveMixedPrecision(options.mixedPrecision),
    shardingStrategy: preset.name,
    autoWrapPolicy: options.autoWrapPolicy,
    activationCheckpointing: options.activationCheckpointing ?? false,
    flattenParameters: options.flattenParameters ?? true,
    backwardPrefetch: options.backwardPrefetch ?? true,
    forwardPrefetch: options.forwardPrefetch ?? true,
    limitAllGathers: options.limitAllGathers ?? true,
    ignoredModules: options.ignoredModules ?? [],
    syncModuleStates: options.syncModuleStates ?? false,
    alignment,
  };
}

/** The keys of `options` and of its nested plain objects (mixedPrecision, an object wrap policy). */
export function checkFsdpOptions(options: FsdpOptions): void {
  checkFsdpOptionKeys('FullyShardedDataParallel', options, fsdpOptionKeys, pytorchFsdpNames);
  if (typeof options !== 'object' || options === null) return;
  checkMixedPrecisionKeys(options.mixedPrecision);
  checkWrapPolicyKeys('autoWrapPolicy', options.autoWrapPolicy);
  if (typeof options.activationCheckpointing !== 'boolean')
    checkWrapPolicyKeys('activationCheckpointing', options.activationCheckpointing);
}
