import type { BackwardPlan } from '@fsdp-ts/nn';
import type { Parameter } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import type { FsdpError } from '../errors';
import { rankMemoryCap } from '../memory-limit';
import type { ResolvedFsdpOptions } from '../options';
import type { FsdpUnit, UnitLocation } from './fsdp-unit';
import { tapGradient } from './gradient-tap';
import { MemoryPressureCollector } from './memory-pressure';
import { ReleasedParametersByUnit } from './released-parameters';
import type { StepContext } from './step-context';
import { isSettledStepFailure, settleStepFailure, stepFailedError } from './step-failure';
import type { TrainingStateMachine } from './training-state';
import type { CommunicationStatistics, UnitGathering } from './unit-gathering';

/** What one training step needs of the wrapper. */
export interface StepParts {
  readonly units: readonly FsdpUnit[];
  readonly locations: ReadonlyMap<Parameter, UnitLocation>;
  readonly ignored: ReadonlySet<Parameter>;
  readonly options: ResolvedFsdpOptions;
  readonly training: TrainingStateMachine;
  readonly statistics: CommunicationStatistics;
  /** Prefetches the unit after the next one once a unit's backward is done (see [Note: in-flight all-gathers]). */
  readonly gathering?: UnitGathering;
}

/**
 * One training step from backward()'s plan to its end: the step's context, the gradients
 * arriving unit by unit and the reductions they start, the end of the step, and its abort.
 * The forward order of the last completed training forward outlives the step (prefetch order).
 */
export class StepLifecycle {
  readonly #parts: StepParts;
  #step: StepContext | null = null;
  #lastOrder: FsdpUnit[] = [];
  /** See [Note: collecting under a memory cap]. */
  readonly #pressure = new MemoryPressureCollector(rankMemoryCap());

  constructor(parts: StepParts) {
    this.#parts = parts;
  }

  /** How many full collections a known memory cap has caused (see [Note: collecting under a memory cap]). */
  get pressureCollections(): number {
    return this.#pressure.collections;
  }

  /**
   * Before a unit is gathered for forward: a collection when memory is under pressure (see
   * [Note: collecting under a memory cap]), so the buffers the last units freed are returned
   * before the next one is allocated.
   */
  relievePressure(): void {
    this.#pressure.check();
  }

  /** The running step, or null outside backward(). */
  get current(): StepContext | null {
    return this.#step;
  }

  /** The non-root units in the order the last completed training forward ran them. */
  get lastOrder(): readonly FsdpUnit[] {
    return this.#lastOrder;
  }

  /** A training forward completed: its unit order is the prefetch order from now on. */
  recordForwardOrder(): void {
    if (this.#step !== null) this.#lastOrder = [...this.#step.order];
  }

  /** See [Note: gradient hook] in @fsdp-ts/nn: FSDP computes and reduces its own gradients. */
  begin(): BackwardPlan {
    const { training, statistics, units, ignored } = this.#parts;
    training.beginBackward();
    statistics.allGatherWaitMs = 0;
    statistics.reductionWaitMs = 0;
    const anchor = tf.scalar(0);
    this.#step = {
      anchor,
      tapped: new Map(),
      released: new ReleasedParametersByUnit(),
      order: [],
      sync: training.syncGradients,
      reducing: [],
      keptGathered: null,
    };
    for (const unit of units) unit.reduction.beginStep();
    const ignoredTrainable = [...ignored].filter((parameter) => parameter.requiresGrad);
    return {
      parameters: ignoredTrainable,
      extraInputs: [anchor],
      afterGradients: () => this.finish(),
      onError: (error) => {
        // See [Note: step failure]: forward's failure was settled there; any other is settled here.
        const thrown = isSettledStepFailure(error) ? error : this.settleFailure(error);
        this.abort();
        return thrown;
      },
    };
  }

  /** A trainable Parameter's tensor during a step: a gradient tap on `raw` (same dataId). */
  tap(parameter: Parameter, raw: tf.Tensor, step: StepContext): tf.Tensor {
    if (!parameter.requiresGrad) return raw;
    const location = this.#parts.locations.get(parameter)!;
    // One gradient per tap: a unit called twice expects each call's (see [Note: units called more than once]).
    location.unit.reduction.expectGradients(1);
    return tapGradient(raw, step.anchor, (gradient) => this.receiveTappedGradient(location, gradient));
  }

  private receiveTappedGradient(location: UnitLocation, gradient: tf.Tensor): void {
    const { unit, handle, index } = location;
    unit.reduction.write(handle, index, gradient);
    if (unit.reduction.gradientArrived()) {
      if (unit.isRoot || !this.#parts.options.sharding.shardParameters) {
        this.startUnitReduction(unit);
        return;
      }
      // The unit's backward is done: free its gathered parameters (and their tensors' memory),
      // then issue the all-gather of the unit two ahead in backward before this unit's
      // reduce-scatter, so it does not queue behind it on the communication worker.
      this.#step?.released.release(unit);
      unit.reshard();
      const step = this.#step;
      if (step !== null) this.#parts.gathering?.prefetchAfterBackwardOf(unit, step.order);
      this.startUnitReduction(unit);
      this.#pressure.check();
    }
  }

  /**
   * [Note: bounded gradient memory]
   * Issues the unit's reduction, then finishes every earlier one but the newest: the main thread
   * waits for unit k-1's reduce-scatter only after issuing unit k's, so each had a unit's worth of
   * backward compute to overlap with, and at most two units' unsharded gradients are alive. The
   * rule depends only on the order of units, never on timing, so every rank issues the replica
   * all-reduces of hybrid sharding in the same order.
   * Under no-shard the flat gradients stay whole whatever happens (they are the `grad`s), and a
   * bfloat16 reduce runs on words rounded into the gradient's own bytes, so there is no memory to
   * bound: every all-reduce is awaited after backward, and none blocks backward's compute (see
   * the decision record 2026-12-01-no-shard-reduction.md).
   */
  startUnitReduction(unit: FsdpUnit): void {
    const step = this.#step;
    if (step === null || !step.sync) return;
    unit.reduction.start();
    if (!this.#parts.options.sharding.shardParameters && !unit.reduction.stagesCopies) return;
    step.reducing.push(unit);
    while (step.reducing.length > 1) {
      const start = performance.now();
      step.reducing.shift()!.reduction.finish();
      this.#parts.statistics.reductionWaitMs += performance.now() - start;
    }
  }

  /** After backward: every reduction issued (in unit order on every rank), awaited, units resharded. */
  private finish(): void {
    const { units, statistics, training } = this.#parts;
    try {
      if (this.#step?.sync === false) {
        // noSync: the unsharded gradients stay allocated and keep accumulating.
        for (const unit of units) unit.reduction.keepUnreduced();
        this.reshardAll();
        return;
      }
      for (const unit of units) unit.reduction.start();
      const start = performance.now();
      for (const unit of units) unit.reduction.finish();
      statistics.reductionWaitMs += performance.now() - start;
      this.reshardAll();
    } finally {
      this.#step = null;
      training.endBackward();
      this.#pressure.check();
    }
  }

  /** See [Note: step failure]: agrees on `error` over every group FSDP uses, or aborts them. */
  private settleFailure(error: unknown): FsdpError {
    const { group, replicateGroup } = this.#parts.options;
    return stepFailedError(error, group.rank, settleStepFailure([group, replicateGroup], error));
  }

  /**
   * After an exception in forward, the loss or backward (and its settlement, [Note: step failure]):
   * every issued collective waited for, every unit sharded and its reduction idle, the training
   * state out of 'backward'.
   */
  private abort(): void {
    try {
      for (const unit of this.#parts.units) unit.reduction.abort();
      this.reshardAllAfterFailure();
    } finally {
      this.#step = null;
      // After a failed afterGradients the step has already ended.
      if (this.#parts.training.state === 'backward') this.#parts.training.endBackward();
    }
  }

  /**
   * After a failed step or forward: reshards every unit like reshardAll, and a failed all-gather
   * of a broken group does not replace the step's failure (the caller throws that).
   */
  reshardAllAfterFailure(): void {
    this.#step?.released.releaseAll();
    if (!this.#parts.options.sharding.shardParameters) return;
    for (const unit of this.#parts.units) {
      try {
        if (unit.state !== 'sharded') unit.reshard();
      } catch {
        // The unit ended sharded (see FsdpUnit.reshard); the step failed already.
      }
    }
  }

  /** Releases every released unit's parameter tensors and reshards every gathered unit. */
  reshardAll(): void {
    this.#step?.released.releaseAll();
    if (!this.#parts.options.sharding.shardParameters) return;
    for (const unit of this.#parts.units) if (unit.state !== 'sharded') unit.reshard();
  }
}
