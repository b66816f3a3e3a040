import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { StateDict } from '@fsdp-ts/nn';
import {
  type BackwardPlan,
  backwardHook,
  Module,
  randomStatefulModules,
  withParameterTensors,
} from '@fsdp-ts/nn';
import { type Parameter, toTf } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { clipGradNorm } from './clip-grad-norm';
import { FsdpError } from './errors';
import { withHybridGroups } from './hybrid-shard';
import { buildUnits } from './internal/build-units';
import type { FsdpUnit, FsdpUnitView, ParameterLocation, UnitLocation } from './internal/fsdp-unit';
import { tapGradient } from './internal/gradient-tap';
import { preBackwardHook } from './internal/pre-backward-hook';
import { reclaimUnflattenedParameters } from './internal/reclaim-unflattened';
import { ReleasedParameters } from './internal/released-parameters';
import type { StepContext } from './internal/step-context';
import { abortGroups, stepFailedError } from './internal/step-failure';
import { checkSameStructure, describeStructure } from './internal/structure-check';
import { syncModuleStates } from './internal/sync-module-states';
import { type TrainingState, TrainingStateMachine } from './internal/training-state';
import { runRecomputingUnit } from './internal/unit-function';
import { fsdpRuntime, type WrapperRuntime } from './internal/wrapper-runtime';
import type { MemoryEstimate } from './memory-estimate';
import { warnWhenOverMemoryLimit } from './memory-warning';
import { type FsdpOptions, type ResolvedFsdpOptions, resolveOptions } from './options';
import { type FullStateDictOptions, fullStateDict, loadFullStateDict } from './state-dict/full-state-dict';
import {
  loadShardedStateDict,
  type ShardedStateDict,
  shardedStateDict,
} from './state-dict/sharded-state-dict';
import { type SummonOptions, summonFullParams } from './summon-full-params';
import { policyMatches } from './wrap-policy';

/**
 * What the wrapper is doing, for the methods that must not run in the middle of something else.
 * 'idle' between steps; 'forward' inside forward(); 'backward' from backward()'s plan to its end;
 * 'summoned' inside summonFullParams. (`trainingState` is the same with 'summoning'.)
 */
export type WrapperActivity = 'idle' | 'forward' | 'backward' | 'summoned';

/** Communication the main thread waited for in the last step (not overlapped with compute). */
export interface CommunicationStatistics {
  allGatherWaitMs: number;
  reductionWaitMs: number;
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
  readonly #units: readonly FsdpUnit[];
  readonly #locations: Map<Parameter, UnitLocation>;
  readonly #ignored: Set<Parameter>;
  readonly #training: TrainingStateMachine;
  readonly #runtime: WrapperRuntime;
  #step: StepContext | null = null;
  #lastOrder: FsdpUnit[] = [];
  /** Units whose forward is recomputed in backward (activation checkpointing). */
  readonly #recomputed: ReadonlySet<FsdpUnit>;

  /**
   * The async constructor: also builds the sub-groups of 'hybrid-shard' from `group` and
   * `shardGroupSize` (see hybridShardGroups). Collective, like the constructor.
   */
  static async create<M extends Module>(
    module: M,
    options: FsdpOptions,
  ): Promise<FullyShardedDataParallel<M>> {
    return new FullyShardedDataParallel(module, await withHybridGroups(options));
  }

  constructor(module: M, options: FsdpOptions) {
    super();
    this.module = module;
    this.options = resolveOptions(options);
    const { replicateGroup } = this.options;
    if (this.options.syncModuleStates) {
      syncModuleStates(this.options.group, module);
      if (replicateGroup !== null) syncModuleStates(replicateGroup, module);
    }
    const built = buildUnits(module, this.options);
    this.#units = built.units;
    this.#locations = built.locations;
    this.#ignored = built.ignored;
    this.#training = new TrainingStateMachine(this.options.group.rank);
    this.#runtime = { units: this.#units, training: this.#training };
    checkSameStructure(this.options.group, describeStructure(this.#units));
    if (replicateGroup !== null) checkSameStructure(replicateGroup, describeStructure(this.#units));
    for (const unit of this.#units) if (!unit.isRoot) this.interceptForward(unit);
    // [Note: releasing the unflattened parameters]
    reclaimUnflattenedParameters(
      4 *
        this.#units.reduce(
          (sum, unit) => sum + unit.handles.reduce((total, handle) => total + handle.layout.totalNumel, 0),
          0,
        ),
    );
    const checkpointing = this.options.activationCheckpointing;
    this.#recomputed = new Set(
      this.#units.filter(
        (unit) =>
          !unit.isRoot &&
          (this.options.sharding.recompute ||
            checkpointing === true ||
            (checkpointing !== false && policyMatches(checkpointing, unit.module, unit.name))),
      ),
    );
    this.memoryEstimate = warnWhenOverMemoryLimit(
      this.#units,
      this.options.sharding,
      this.options.group.size,
    );
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
  }

  get group(): ProcessGroup {
    return this.options.group;
  }

  /**
   * Runs the wrapped module's forward with the root unit gathered. Typed from the wrapped module:
   * wrapping a `GPT` gives `forward(tokens: tf.Tensor): tf.Tensor` (see ForwardInputs).
   */
  forward(...inputs: ForwardInputs<M>): ForwardOutput<M> {
    this.#training.beginForward();
    const root = this.#units[0]!;
    const training = this.#step !== null;
    let completed = false;
    try {
      this.gather(root);
      // The first unit's all-gather overlaps the root's own first layers (embeddings).
      this.prefetchAfter(root, [root, ...this.#lastOrder]);
      const output = withParameterTensors(this.parameterTensors(root), () =>
        (this.module.forward as (...args: unknown[]) => unknown)(...inputs),
      ) as ForwardOutput<M>;
      completed = true;
      if (!training || !(output instanceof tf.Tensor) || !this.options.backwardPrefetch) return output;
      // [Note: first backward unit] The last unit of forward is the first of backward: its
      // all-gather starts when backward reaches the model's output, and overlaps the root's
      // backward up to that unit. (Not at the end of forward: units stay sharded after forward.)
      const step = this.#step!;
      return preBackwardHook(output, step.anchor, () =>
        this.prefetchAfter(root, [root, ...[...step.order].reverse()], true),
      ) as ForwardOutput<M>;
    } catch (error) {
      this.abortGroups(error);
      throw error instanceof FsdpError && error.code === 'step-failed'
        ? error
        : stepFailedError(error, this.group.rank);
    } finally {
      this.#training.endForward();
      if (training && completed) this.#lastOrder = [...this.#step!.order];
      if (!training) this.reshardAll();
    }
  }

  // The wrapper shows the wrapped module's tree, names unprefixed.
  override namedModules(prefix = ''): [string, Module][] {
    return this.module.namedModules(prefix);
  }

  override namedChildren(): [string, Module][] {
    return this.module.namedChildren();
  }

  override children(): Module[] {
    return this.module.children();
  }

  override apply(fn: (module: Module) => void): this {
    this.module.apply(fn);
    return this;
  }

  /** See [Note: gradient hook] in @fsdp-ts/nn: FSDP computes and reduces its own gradients. */
  [backwardHook](): BackwardPlan {
    this.#training.beginBackward();
    this.statistics.allGatherWaitMs = 0;
    this.statistics.reductionWaitMs = 0;
    const anchor = tf.scalar(0);
    this.#step = {
      anchor,
      tapped: new Map(),
      released: new Map(),
      order: [],
      sync: this.#training.syncGradients,
      reducing: [],
    };
    for (const unit of this.#units) unit.reduction.beginStep(unit.trainableParameters().length);
    const ignoredTrainable = [...this.#ignored].filter((parameter) => parameter.requiresGrad);
    return {
      parameters: ignoredTrainable,
      extraInputs: [anchor],
      afterGradients: () => this.finishStep(),
      onError: (error) => {
        this.abortGroups(error);
        this.abortStep();
      },
    };
  }

  /** All-gathers the unit if needed and points its Parameters at full views (timed). */
  private gather(unit: FsdpUnit): void {
    if (unit.state === 'unsharded') return;
    const start = performance.now();
    unit.finishUnshard(this.group);
    this.statistics.allGatherWaitMs += performance.now() - start;
  }

  /** A forward wrapper hook on the unit's module (see [Note: forward hooks] in @fsdp-ts/nn). */
  private interceptForward(unit: FsdpUnit): void {
    unit.module.registerForwardWrapper((next, args) => this.runUnit(unit, next, args));
  }

  private runUnit(unit: FsdpUnit, original: (...args: unknown[]) => unknown, args: unknown[]): unknown {
    const step = this.#step;
    if (this.#training.state === 'summoning') return this.runSummonedUnit(unit, original, args);
    if (step !== null && !step.order.includes(unit)) step.order.push(unit);
    const { sharding } = this.options;
    if (step !== null && this.#recomputed.has(unit)) {
      return runRecomputingUnit(original, args, step.anchor, this.recomputeHooks(unit), unit.label);
    }
    if (step !== null && sharding.reshardAfterForward)
      return this.runReleasingUnit(unit, original, args, step);
    this.gather(unit);
    this.prefetchAfter(unit, this.#lastOrder);
    try {
      return withParameterTensors(this.parameterTensors(unit), () => original(...args));
    } finally {
      if (step === null && sharding.shardParameters) unit.reshard();
    }
  }

  /**
   * A training forward that keeps the unit's activations and releases its gathered parameters
   * until its backward (see [Note: released parameters]): the parameters are tapped for their
   * gradients; a pre-backward hook on the output gathers the unit again and restores them; the
   * last gradient releases them and reshards (receiveTappedGradient).
   */
  private runReleasingUnit(
    unit: FsdpUnit,
    original: (...args: unknown[]) => unknown,
    args: unknown[],
    step: StepContext,
  ): unknown {
    this.gather(unit);
    this.prefetchAfter(unit, this.#lastOrder);
    const parameters = new ReleasedParameters(unit, (parameter, raw) => this.tap(parameter, raw, step));
    step.released.set(unit, parameters);
    let output: unknown;
    try {
      output = withParameterTensors(parameters.tensors, () => original(...args));
    } finally {
      parameters.release();
      unit.reshard();
    }
    if (!(output instanceof tf.Tensor)) {
      throw new FsdpError(
        `${unit.label} returned ${typeof output} from forward; a unit that reshards after forward must return one tensor.`,
        {
          code: 'unsupported-model',
          expected: 'a tf.Tensor',
          actual: typeof output,
          fix: "wrap a module that returns one tensor, or use shardingStrategy 'shard-grad-op' for this model.",
        },
      );
    }
    return preBackwardHook(output, step.anchor, () => {
      const backwardOrder = [...step.order].reverse();
      this.gather(unit);
      if (this.options.backwardPrefetch) this.prefetchAfter(unit, backwardOrder, true);
      parameters.restore();
    });
  }

  /** A trainable Parameter's tensor during a step: a gradient tap on `raw` (same dataId). */
  private tap(parameter: Parameter, raw: tf.Tensor, step: StepContext): tf.Tensor {
    if (!parameter.requiresGrad) return raw;
    const location = this.#locations.get(parameter)!;
    return tapGradient(raw, step.anchor, (gradient) => this.receiveTappedGradient(location, gradient));
  }

  /**
   * `model.module.forward()` inside summonFullParams: the unit is already gathered (float32, by
   * summonFullParams) and must stay so until summonFullParams writes back and reshards, so it
   * runs without gathering or resharding. With rank0Only the other ranks hold shards only.
   */
  private runSummonedUnit(
    unit: FsdpUnit,
    original: (...args: unknown[]) => unknown,
    args: unknown[],
  ): unknown {
    if (unit.state !== 'unsharded') {
      throw new FsdpError(
        `${unit.label}'s forward ran inside summonFullParams on a rank that holds only shards.`,
        {
          code: 'wrong-state',
          rank: this.group.rank,
          expected: 'full parameters (summonFullParams without rank0Only, or rank 0)',
          actual: unit.state,
          fix: 'run the forward on rank 0 only under rank0Only, or summon without rank0Only.',
        },
      );
    }
    return withParameterTensors(this.parameterTensors(unit), () => original(...args));
  }

  private recomputeHooks(unit: FsdpUnit) {
    const created: tf.Tensor[] = [];
    return {
      gatherParameters: (phase: 'forward' | 'backward') => {
        if (phase === 'forward') {
          this.gather(unit);
          this.prefetchAfter(unit, this.#lastOrder);
        } else {
          const backwardOrder = [...(this.#step?.order ?? this.#lastOrder)].reverse();
          this.gather(unit);
          if (this.options.backwardPrefetch) this.prefetchAfter(unit, backwardOrder, true);
        }
        const tensors = new Map<Parameter, tf.Tensor>();
        for (const handle of unit.handles) {
          handle.parameters.forEach((parameter, index) => {
            const tensor = toTf(handle.unshardedView(index));
            created.push(tensor);
            tensors.set(parameter, tensor);
          });
        }
        return tensors;
      },
      releaseParameters: (phase: 'forward' | 'backward') => {
        for (const tensor of created.splice(0)) tensor.dispose();
        const { sharding } = this.options;
        if (!sharding.shardParameters) return;
        if (phase === 'backward' || sharding.reshardAfterForward) unit.reshard();
      },
      trainable: () => unit.trainableParameters(),
      randomLayers: () => randomStatefulModules(unit.module),
      onParameterGradients: (gradients: tf.Tensor[]) => {
        unit.trainableParameters().forEach((parameter, index) => {
          const { handle, index: position } = this.#locations.get(parameter)!;
          unit.reduction.write(handle, position, gradients[index]!);
        });
        this.startUnitReduction(unit);
      },
    };
  }

  /**
   * Issues the all-gather of the unit after `unit` in `order` (prefetch), within the in-flight limit.
   *
   * [Note: in-flight all-gathers]
   * With `limitAllGathers` (default) a prefetch is issued only when no other unit is 'gathering':
   * at most one prefetched all-gather is in flight, so besides the root unit at most two units are
   * gathered at once, the running one and the next (the memory estimate's UNITS_GATHERED_AT_ONCE).
   * Without it every prefetch is issued as soon as its predecessor starts.
   */
  private prefetchAfter(unit: FsdpUnit, order: readonly FsdpUnit[], always = false): void {
    if (!always && !this.options.forwardPrefetch) return;
    if (!this.options.sharding.shardParameters) return;
    const position = order.indexOf(unit);
    const next = position < 0 ? undefined : order[position + 1];
    if (next === undefined || next.state !== 'sharded') return;
    const inFlight = this.#units.filter((candidate) => candidate.state === 'gathering').length;
    if (this.options.limitAllGathers && inFlight >= 1) return;
    next.startUnshard(this.group);
  }

  /** Tensors standing for a gathered unit's Parameters: tapped for gradients during a step. */
  private parameterTensors(unit: FsdpUnit): Map<Parameter, tf.Tensor> {
    const step = this.#step;
    const cached = step?.tapped.get(unit);
    if (cached !== undefined) return cached;
    const tensors = new Map<Parameter, tf.Tensor>();
    for (const handle of unit.handles) {
      handle.parameters.forEach((parameter, index) => {
        const raw = toTf(handle.unshardedView(index));
        tensors.set(parameter, step === null ? raw : this.tap(parameter, raw, step));
      });
    }
    step?.tapped.set(unit, tensors);
    return tensors;
  }

  private receiveTappedGradient(location: UnitLocation, gradient: tf.Tensor): void {
    const { unit, handle, index } = location;
    unit.reduction.write(handle, index, gradient);
    if (unit.reduction.gradientArrived()) {
      this.startUnitReduction(unit);
      if (unit.isRoot || !this.options.sharding.shardParameters) return;
      // The unit's backward is done: free its gathered parameters (and their tensors' memory).
      this.#step?.released.get(unit)?.release();
      unit.reshard();
    }
  }

  /**
   * [Note: bounded gradient memory]
   * Issues the unit's reduction, then finishes every earlier one but the newest: the main thread
   * waits for unit k-1's reduce-scatter only after issuing unit k's, so each had a unit's worth of
   * backward compute to overlap with, and at most two units' unsharded gradients are alive. The
   * rule depends only on the order of units, never on timing, so every rank issues the replica
   * all-reduces of hybrid sharding in the same order.
   */
  private startUnitReduction(unit: FsdpUnit): void {
    const step = this.#step;
    if (step === null || !step.sync) return;
    unit.reduction.start();
    step.reducing.push(unit);
    while (step.reducing.length > 1) {
      const start = performance.now();
      step.reducing.shift()!.reduction.finish();
      this.statistics.reductionWaitMs += performance.now() - start;
    }
  }

  /** After backward: every reduction issued (in unit order on every rank), awaited, units resharded. */
  private finishStep(): void {
    try {
      if (this.#step?.sync === false) {
        // noSync: the unsharded gradients stay allocated and keep accumulating.
        for (const unit of this.#units) unit.reduction.keepUnreduced();
        this.reshardAll();
        return;
      }
      for (const unit of this.#units) unit.reduction.start();
      const start = performance.now();
      for (const unit of this.#units) unit.reduction.finish();
      this.statistics.reductionWaitMs += performance.now() - start;
      this.reshardAll();
    } finally {
      this.#step = null;
      this.#training.endBackward();
    }
  }

  /** After an exception in forward, the loss or backward: leave every unit sharded and usable. */
  /** See [Note: step failure]. */
  private abortGroups(error: unknown): void {
    abortGroups([this.options.group, this.options.replicateGroup], error);
  }

  private abortStep(): void {
    try {
      for (const unit of this.#units) unit.reduction.abort();
      this.reshardAll();
    } finally {
      this.#step = null;
      // After a failed afterGradients the step has already ended.
      if (this.#training.state === 'backward') this.#training.endBackward();
    }
  }

  private reshardAll(): void {
    for (const parameters of this.#step?.released.values() ?? []) parameters.release();
    if (!this.options.sharding.shardParameters) return;
    for (const unit of this.#units) if (unit.state !== 'sharded') unit.reshard();
  }
}

/** Short alias, as in PyTorch (`FSDP`). */
export const FSDP = FullyShardedDataParallel;
