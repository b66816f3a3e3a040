import type { ShardedStateDict } from '@fsdp-ts/checkpoint';
import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { StateDict } from '@fsdp-ts/nn';
import { type BackwardPlan, backwardHook, Module, withParameterTensors } from '@fsdp-ts/nn';
import type { OptimizerStateOffload } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { clipGradNorm } from './clip-grad-norm';
import { FsdpError } from './errors';
import { withHybridGroups } from './hybrid-shard';
import { buildUnits } from './internal/build-units';
import type { FsdpUnit, FsdpUnitView, ParameterLocation, UnitLocation } from './internal/fsdp-unit';
import { preBackwardHook } from './internal/pre-backward-hook';
import { flattenedBytes, reclaimUnflattenedParameters } from './internal/reclaim-unflattened';
import { recomputedUnits } from './internal/recomputed-units';
import { forwardFailure } from './internal/step-failure';
import { StepLifecycle } from './internal/step-lifecycle';
import { checkSameStructure, describeStructure } from './internal/structure-check';
import { syncModuleStates } from './internal/sync-module-states';
import { type TrainingState, TrainingStateMachine } from './internal/training-state';
import { UnitForward } from './internal/unit-forward';
import { type CommunicationStatistics, UnitGathering } from './internal/unit-gathering';
import { fsdpRuntime, type WrapperRuntime } from './internal/wrapper-runtime';
import type { MemoryEstimate } from './memory-estimate';
import { warnWhenOverMemoryLimit } from './memory-warning';
import { emptyOffloadStatistics, type OffloadStatistics } from './offload/offload-store';
import { OffloadedOptimizerState } from './offload/offloaded-optimizer-state';
import { OffloadedParameters } from './offload/offloaded-parameters';
import { checkFsdpOptions, type FsdpOptions, type ResolvedFsdpOptions, resolveOptions } from './options';
import { type FullStateDictOptions, fullStateDict, loadFullStateDict } from './state-dict/full-state-dict';
import { loadShardedStateDict, shardedStateDict } from './state-dict/sharded-state-dict';
import { type SummonOptions, summonFullParams } from './summon-full-params';

/**
 * What the wrapper is doing, for the methods that must not run in the middle of something else.
 * 'idle' between steps; 'forward' inside forward(); 'backward' from backward()'s plan to its end;
 * 'summoned' inside summonFullParams. (`trainingState` is the same with 'summoning'.)
 */
export type WrapperActivity = 'idle' | 'forward' | 'backward' | 'summoned';

export type { CommunicationStatistics } from './internal/unit-gathering';
export type { OffloadStatistics } from './offload/offload-store';

/** What `offloadOptimizerState` needs of an optimizer (Adam, AdamW and LAMB of @fsdp-ts/optim). */
export interface OffloadableOptimizer {
  /** Moves the optimizer's state into `offload` (@fsdp-ts/optim's Optimizer.offloadState). */
  offloadState(offload: OptimizerStateOffload): void;
}

/**
 * The arguments of the wrapped module's forward. A wrapper typed with the plain `Module` (the
 * default, e.g. a function taking any `FullyShardedDataParallel`) accepts any arguments, as the
 * base `Module.forward` declares none.
 */
export type ForwardInputs<M extends Module> = Module extends M ? unknown[] : Parameters<M['forward']>;
/** What the wrapped module's forward returns (`unknown` for the plain `Module`). */
export type ForwardOutput<M extends Module> = Module extends M ? unknown : ReturnType<M['forward']>;

/**
 * FullyShardedDataParallel: wraps a Module so its parameters, gradients and optimizer state are
 * sharded over a process group, while every original Parameter stays the object the user holds.
 *
 * [Note: what Parameters look like]
 * Outside forward/backward every managed Parameter's `data` is the 1-D view of this rank's part
 * of it (possibly empty) and, after a backward, its `grad` the matching 1-D view of the averaged,
 * sharded gradient: an optimizer built from any subset of `model.module.…parameters()` steps
 * exactly that subset's shards. While a unit runs, its Parameters are full-shape views into the
 * unit's gathered flat buffer. Under 'no-shard' they are full-shape views all the time.
 *
 * The constructor is collective and synchronous: every rank of the group must construct the same
 * model with the same options at the same point.
 */
export class FullyShardedDataParallel<M extends Module = Module> extends Module {
  readonly module: M;
  readonly options: ResolvedFsdpOptions;
  /** Time the main thread waited on communication during the last step. */
  readonly statistics: CommunicationStatistics = { allGatherWaitMs: 0, reductionWaitMs: 0 };
  /**
   * This rank's estimated training memory with Adam (see [Note: memory model]); the constructor
   * warns when it exceeds the rank's budget (fsdp-run --memory-per-rank, the cgroup, or free memory).
   */
  readonly memoryEstimate: MemoryEstimate;
  /**
   * Offload I/O of the last optimizer step (reset when a step begins): wall milliseconds in reads,
   * writes (with fdatasync) and CRC-32s, and the bytes moved. Zeros without offload.
   */
  readonly offloadStatistics: OffloadStatistics = emptyOffloadStatistics();
  /** The optimizer state's store when `offload.optimizerState` is not 'none'. */
  readonly #offload: OffloadedOptimizerState | null;
  /** The parameter shards' store when `offload.parameters` is 'disk' ([Note: offloaded parameters]). */
  readonly #offloadedParameters: OffloadedParameters | null;
  readonly #units: readonly FsdpUnit[];
  readonly #locations: Map<Parameter, UnitLocation>;
  readonly #ignored: Set<Parameter>;
  readonly #training: TrainingStateMachine;
  readonly #runtime: WrapperRuntime;
  /** The training step in progress and its gradients (see step-lifecycle.ts). */
  readonly #step: StepLifecycle;
  /** How unit forwards run (see unit-forward.ts). */
  readonly #unitForward: UnitForward;
  readonly #gathering: UnitGathering;

  /**
   * The async constructor: also builds the sub-groups of 'hybrid-shard' from `group` and
   * `shardGroupSize` (see hybridShardGroups). Collective, like the constructor.
   */
  static async create<M extends Module>(
    module: M,
    options: FsdpOptions,
  ): Promise<FullyShardedDataParallel<M>> {
    checkFsdpOptions(options);
    return new FullyShardedDataParallel(module, await withHybridGroups(options));
  }

  constructor(module: M, options: FsdpOptions) {
    super();
    this.module = module;
    this.options = resolveOptions(options);
    this.#offload =
      this.options.offload.optimizerState === 'none'
        ? null
        : new OffloadedOptimizerState(this.options.offload, this.options.group, this.offloadStatistics);
    const { replicateGroup } = this.options;
    if (this.options.syncModuleStates) {
      syncModuleStates(this.options.group, module);
      if (replicateGroup !== null) syncModuleStates(replicateGroup, module);
    }
    const built = buildUnits(module, this.options);
    this.#units = built.units;
    this.#locations = built.locations;
    this.#ignored = built.ignored;
    this.#offloadedParameters = this.#offloadParameters();
    this.#training = new TrainingStateMachine(this.options.group.rank);
    this.#runtime = { units: this.#units, training: this.#training, optimizerStateOffload: this.#offload };
    checkSameStructure(this.options.group, describeStructure(this.#units));
    if (replicateGroup !== null) checkSameStructure(replicateGroup, describeStructure(this.#units));
    const parts = {
      units: this.#units,
      locations: this.#locations,
      ignored: this.#ignored,
      options: this.options,
      training: this.#training,
      statistics: this.statistics,
    };
    this.#gathering = new UnitGathering(this.#units, this.options, this.statistics);
    this.#step = new StepLifecycle({ ...parts, gathering: this.#gathering });
    this.#unitForward = new UnitForward({
      ...parts,
      gathering: this.#gathering,
      step: this.#step,
      recomputed: recomputedUnits(this.#units, this.options),
    });
    for (const unit of this.#units) if (!unit.isRoot) this.#unitForward.intercept(unit);
    // [Note: releasing the unflattened parameters]
    reclaimUnflattenedParameters(flattenedBytes(this.#units));
    this.memoryEstimate = warnWhenOverMemoryLimit(
      this.#units,
      this.options.sharding,
      this.options.group.size,
      {
        optimizerState: this.options.offload.optimizerState,
        parameters: this.options.offload.parameters,
      },
    );
  }

  #offloadParameters(): OffloadedParameters | null {
    if (this.options.offload.parameters !== 'disk') return null;
    if (!this.options.sharding.shardParameters) {
      throw new FsdpError(
        `offload.parameters 'disk' needs sharded parameters; shardingStrategy '${this.options.shardingStrategy}' keeps whole ones.`,
        {
          code: 'invalid-option',
          expected: "shardingStrategy 'full-shard' or 'shard-grad-op' with offload.parameters 'disk'",
          actual: this.options.shardingStrategy,
          fix: "use shardingStrategy 'full-shard' (the default), or offload only the optimizer state.",
        },
      );
    }
    const offloaded = new OffloadedParameters(
      this.#units,
      this.options.offload,
      this.options.group,
      this.offloadStatistics,
    );
    for (const unit of this.#units) unit.shardPager = offloaded;
    return offloaded;
  }

  /**
   * @internal with offload.parameters 'disk': reads every parameter shard back into memory (they
   * stay until the next forward), for code that reads or writes the shards outside a step (state
   * dicts, checkpoints, summonFullParams). Throws this rank's failed read. A no-op otherwise.
   */
  residentParameterShards(): void {
    this.#offloadedParameters?.makeResident('throw');
  }

  /** The root unit first, then the units the wrap policy selected, in traversal order (read-only views). */
  get units(): readonly FsdpUnitView[] {
    return this.#units;
  }

  /** What the wrapper is doing now (see [Note: training state]). */
  get trainingState(): TrainingState {
    return this.#training.state;
  }

  /** What the wrapper is doing now (see WrapperActivity). */
  get activity(): WrapperActivity {
    const state = this.#training.state;
    return state === 'summoning' ? 'summoned' : state;
  }

  /** @internal this package's modules reach units and the training state through this (see wrapper-runtime.ts). */
  get [fsdpRuntime](): WrapperRuntime {
    return this.#runtime;
  }

  /** Parameters of ignoredModules: not sharded, not reduced. */
  get ignoredParameters(): ReadonlySet<Parameter> {
    return this.#ignored;
  }

  /** Where a managed Parameter lives (unit, handle, index); undefined for ignored ones. */
  locate(parameter: Parameter): ParameterLocation | undefined {
    return this.#locations.get(parameter);
  }

  /**
   * Runs `fn` with every Parameter full-shape (see summon-full-params.ts). Collective.
   * `{ writeback = true, rank0Only = false, withGrads = false }`.
   */
  summonFullParams<T>(fn: () => T, options: SummonOptions = {}): T {
    return summonFullParams(this, fn, options);
  }

  /**
   * Keeps `optimizer`'s state where `offload.optimizerState` says (host memory apart from the
   * model, or files under `offload.directory`), stepped a chunk at a time with the same results
   * (see architecture/decisions/2026-12-02-offload.md). Call it once, on every rank, after building
   * the optimizer over this model's parameters and before its first step; state it already has
   * moves. Returns the optimizer.
   */
  offloadOptimizerState<O extends OffloadableOptimizer>(optimizer: O): O {
    if (this.#offload === null) {
      throw new FsdpError("offloadOptimizerState: this model's offload.optimizerState is 'none'.", {
        code: 'invalid-option',
        expected: "offload: { optimizerState: 'memory' | 'disk' } in the FSDP options",
        actual: this.options.offload.optimizerState,
        fix: "construct the model with { offload: { optimizerState: 'disk', directory } }, or do not call offloadOptimizerState.",
      });
    }
    optimizer.offloadState(this.#offload);
    this.#offload.optimizer = optimizer;
    return optimizer;
  }

  /** Backwards inside `fn` accumulate gradients without reducing them (see no-sync.ts). */
  noSync<T>(fn: () => T): T {
    return this.#training.withoutSync(fn);
  }

  /** Clips the gradients to a total norm of `maxNorm`; returns the norm before clipping. Collective. */
  clipGradNorm(maxNorm: number, normType: number = 2): number {
    return clipGradNorm(this, maxNorm, normType);
  }

  /** Full-shape copies of every parameter and buffer by original name, gathered unit by unit. Collective. */
  fullStateDict(options: FullStateDictOptions = {}): StateDict {
    return fullStateDict(this, options);
  }

  /**
   * The full state dict, like PyTorch's default `state_dict()` under FSDP: `fullStateDict()`
   * (collective: call it on every rank; full-shape copies, not views of the shards). Module's own
   * stateDict would list 1-D shards under the original names.
   */
  override stateDict(): StateDict {
    return fullStateDict(this);
  }

  /** Loads a full state dict (every rank passes the whole dict); no communication. */
  loadFullStateDict(dict: StateDict): void {
    loadFullStateDict(this, dict);
  }

  /** This rank's shards with their flat-parameter layouts; no communication. */
  shardedStateDict(): ShardedStateDict {
    return shardedStateDict(this);
  }

  /** Loads sharded state dicts saved at any world size (pass every saving rank's dict); no communication. */
  loadShardedStateDict(dicts: ShardedStateDict | readonly ShardedStateDict[]): void {
    loadShardedStateDict(this, dicts);
  }

  /** @internal throws unless idle (for methods that must not run inside forward, backward or summonFullParams). */
  expectIdle(method: string): void {
    this.#training.expectIdle(method);
    // Every idle method reads or writes the shards: [Note: offloaded parameters].
    this.residentParameterShards();
  }

  /** The process group the parameters are sharded over. */
  get group(): ProcessGroup {
    return this.options.group;
  }

  /**
   * Runs the wrapped module's forward with the root unit gathered. Typed from the wrapped module:
   * wrapping a `GPT` gives `forward(tokens: tf.Tensor): tf.Tensor` (see ForwardInputs).
   */
  forward(...inputs: ForwardInputs<M>): ForwardOutput<M> {
    const training = this.#step.current !== null;
    // A training step settled them when its backward began.
    if (!training) this.#offloadedParameters?.settle();
    this.#training.beginForward();
    const root = this.#units[0]!;
    let completed = false;
    try {
      this.#step.relievePressure();
      this.#gathering.gatherRoot(root, this.#step.lastOrder);
      const output = withParameterTensors(this.#unitForward.parameterTensors(root), () =>
        (this.module.forward as (...args: unknown[]) => unknown)(...inputs),
      ) as ForwardOutput<M>;
      completed = true;
      if (!training) this.#offloadedParameters?.agreeOnReads('reading the offloaded parameters');
      const step = this.#step.current;
      if (step === null || !(output instanceof tf.Tensor) || !this.options.backwardPrefetch) return output;
      // [Note: first backward unit] The last unit of forward is the first of backward: its
      // all-gather starts when backward reaches the model's output and overlaps the root's
      // backward up to that unit (not at the end of forward: units stay sharded after forward).
      return preBackwardHook(output, step.anchor, () =>
        this.#gathering.prefetchFirstOfBackward(root, step.order),
      ) as ForwardOutput<M>;
    } catch (error) {
      throw forwardFailure([this.options.group, this.options.replicateGroup], error, this.group.rank);
    } finally {
      this.#training.endForward();
      if (training && completed) this.#step.recordForwardOrder();
      if (!training) {
        if (completed) this.#step.reshardAll();
        else this.#step.reshardAllAfterFailure();
      }
    }
  }

  // The wrapper shows the wrapped module's tree, names unprefixed.
  override namedModules(prefix = ''): [string, Module][] {
    return this.module.namedModules(prefix);
  }

  /** The wrapped module's direct submodules, with their names: the wrapper shows the wrapped module's tree. */
  override namedChildren(): [string, Module][] {
    return this.module.namedChildren();
  }

  /** The wrapped module's direct submodules. */
  override children(): Module[] {
    return this.module.children();
  }

  override apply(fn: (module: Module) => void): this {
    this.module.apply(fn);
    return this;
  }

  /** See [Note: gradient hook] in @fsdp-ts/nn: FSDP computes and reduces its own gradients. */
  [backwardHook](): BackwardPlan {
    if (this.#offload !== null && !this.#offload.attached) {
      throw new FsdpError(
        `offload.optimizerState is '${this.options.offload.optimizerState}' but no optimizer is attached, so its state would stay in memory.`,
        {
          code: 'invalid-option',
          expected: 'model.offloadOptimizerState(optimizer) before the first backward',
          actual: 'no optimizer attached',
          fix: 'call model.offloadOptimizerState(optimizer) on every rank after building the optimizer.',
        },
      );
    }
    this.#offload?.prefetch();
    const parameters = this.#offloadedParameters;
    if (parameters === null) return this.#step.begin();
    parameters.settle();
    const plan = this.#step.begin();
    return {
      ...plan,
      afterGradients: () => {
        plan.afterGradients?.();
        parameters.endBackward();
      },
    };
  }
}

/** Short alias, as in PyTorch (`FSDP`). */
export const FSDP = FullyShardedDataParallel;
