import { withParameterTensors } from '@fsdp-ts/nn';
import { type Parameter, ReleasableTensor, toTf } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { FsdpError } from '../errors';
import type { ResolvedFsdpOptions } from '../options';
import type { FsdpUnit, UnitLocation } from './fsdp-unit';
import { preBackwardHook } from './pre-backward-hook';
import { recomputeHooks } from './recomputed-units';
import { ReleasedParameters } from './released-parameters';
import type { StepContext } from './step-context';
import type { StepLifecycle } from './step-lifecycle';
import type { TrainingStateMachine } from './training-state';
import { runRecomputingUnit } from './unit-function';
import type { UnitGathering } from './unit-gathering';

type Forward = (...args: unknown[]) => unknown;

/** What running a unit's forward uses of the wrapper. */
export interface UnitForwardParts {
  readonly options: ResolvedFsdpOptions;
  readonly locations: ReadonlyMap<Parameter, UnitLocation>;
  readonly training: TrainingStateMachine;
  readonly gathering: UnitGathering;
  readonly step: StepLifecycle;
  /** Units whose forward is recomputed in backward (activation checkpointing). */
  readonly recomputed: ReadonlySet<FsdpUnit>;
}

/**
 * How a unit's forward runs, chosen per call: inside summonFullParams, recomputed in backward,
 * keeping activations and releasing its parameters (training under reshard-after-forward), or
 * gathered around the call (everything else). Registered as a forward wrapper on the unit's
 * module (see [Note: forward hooks] in @fsdp-ts/nn).
 */
export class UnitForward {
  readonly #parts: UnitForwardParts;

  constructor(parts: UnitForwardParts) {
    this.#parts = parts;
  }

  /** Wraps the unit's module forward (non-root units). */
  intercept(unit: FsdpUnit): void {
    unit.module.registerForwardWrapper((next, args) => this.run(unit, next, args));
  }

  private run(unit: FsdpUnit, original: Forward, args: unknown[]): unknown {
    const { training, options, gathering, recomputed } = this.#parts;
    const step = this.#parts.step.current;
    if (training.state === 'summoning') return this.runSummoned(unit, original, args);
    if (step !== null && !step.order.includes(unit)) step.order.push(unit);
    if (step !== null && recomputed.has(unit)) {
      return runRecomputingUnit(original, args, step.anchor, recomputeHooks(unit, this.#parts), unit.label);
    }
    if (step !== null && options.sharding.reshardAfterForward)
      return this.runReleasing(unit, original, args, step);
    this.#parts.step.relievePressure();
    gathering.gatherForForward(unit, this.#parts.step.lastOrder);
    try {
      return withParameterTensors(this.parameterTensors(unit), () => original(...args));
    } finally {
      if (step === null && options.sharding.shardParameters) unit.reshard();
    }
  }

  /**
   * A training forward that keeps the unit's activations and releases its gathered parameters
   * until its backward (see [Note: released parameters]): the parameters are tapped for their
   * gradients; a pre-backward hook on the output gathers the unit again and restores them; the
   * last gradient releases them and reshards (StepLifecycle's receiveTappedGradient).
   */
  private runReleasing(unit: FsdpUnit, original: Forward, args: unknown[], step: StepContext): unknown {
    const { gathering } = this.#parts;
    const lifecycle = this.#parts.step;
    this.reshardKept(step, unit);
    lifecycle.relievePressure();
    gathering.gatherForForward(unit, lifecycle.lastOrder);
    const parameters = new ReleasedParameters(unit, (parameter, raw) => lifecycle.tap(parameter, raw, step));
    step.released.add(unit, parameters);
    const last = lifecycle.lastOrder.at(-1) === unit;
    let output: unknown;
    let keep = false;
    try {
      output = withParameterTensors(parameters.tensors, () => original(...args));
      keep = last && output instanceof tf.Tensor;
    } finally {
      parameters.endCall();
      if (!keep) {
        parameters.release();
        unit.reshard();
      }
    }
    if (keep) {
      // [Note: last unit stays gathered]
      step.keptGathered = unit;
      gathering.prefetchNextOfBackward(unit, lifecycle.lastOrder);
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
      gathering.gatherForBackward(unit, step.order);
      parameters.restore();
      if (ReleasableTensor.backendHoldsCopies() && step.released.callCount(unit) === 1)
        unit.freeGatheredValues();
    });
  }

  /**
   * [Note: gathered values the backend holds]
   * On a backend that computes on its own copy (wasm copies a tensor's values into its heap when
   * the tensor is made or restored), a unit's gathered flat parameter is needed only until its
   * tensors are resident: from then until the unit reshards, its backward reads the heap copies
   * and writes gradients into the unsharded gradient buffer. So once its tensors are restored
   * before its backward, the unit's unsharded parameter buffer is freed (the buffer goes back to
   * the storage pool, where the next unit's all-gather takes it): backward then holds one gathered
   * parameter buffer fewer (a TransformerBlock of the 1.3 B GPT: 192 MiB per rank), the heap copy
   * taking its place. Parameter views of the unit read as freed (StorageFreedError) meanwhile. A
   * unit called more than once in the step keeps its buffer: an earlier call's tensors are
   * restored from it later in the same backward ([Note: units called more than once]). A
   * recomputed unit frees it once its recompute's tensors are made (recomputed-units.ts). On cpu
   * the tensors alias the buffer, which therefore stays.
   */

  /**
   * [Note: last unit stays gathered]
   * The last unit of the forward order (as the last completed training forward ran them) is the
   * first whose backward runs, right after the loss: releasing and resharding it after its forward
   * only to all-gather it again before its backward moves one unit's parameters for nothing. So
   * in a training step it keeps its gathered parameters and tensors (its pre-backward hook finds it
   * gathered, its last gradient releases and reshards it as usual), and the unit whose backward
   * comes next is prefetched at once, overlapping the rest of forward and the loss. Two non-root
   * units are gathered then, as the memory model allows. If another unit's forward runs after it
   * (the order changed), the kept unit is released and resharded first, so the bound holds.
   * The first step (no order yet) keeps nothing. PyTorch's FSDP2 offers the same by hand
   * (`reshard_after_forward=False` on the last module).
   */
  private reshardKept(step: StepContext, unit: FsdpUnit): void {
    const kept = step.keptGathered;
    if (kept === null || kept === unit) return;
    step.keptGathered = null;
    if (kept.state !== 'unsharded') return;
    step.released.release(kept);
    kept.reshard();
  }

  /**
   * `model.module.forward()` inside summonFullParams: the unit is already gathered (float32, by
   * summonFullParams) and must stay so until summonFullParams writes back and reshards, so it
   * runs without gathering or resharding. With rank0Only the other ranks hold shards only.
   */
  private runSummoned(unit: FsdpUnit, original: Forward, args: unknown[]): unknown {
    if (unit.state !== 'unsharded') {
      throw new FsdpError(
        `${unit.label}'s forward ran inside summonFullParams on a rank that holds only shards.`,
        {
          code: 'wrong-state',
          rank: this.#parts.options.group.rank,
          expected: 'full parameters (summonFullParams without rank0Only, or rank 0)',
          actual: unit.state,
          fix: 'run the forward on rank 0 only under rank0Only, or summon without rank0Only.',
        },
      );
    }
    return withParameterTensors(this.parameterTensors(unit), () => original(...args));
  }

  /** Tensors standing for a gathered unit's Parameters: tapped for gradients during a step. */
  parameterTensors(unit: FsdpUnit): Map<Parameter, tf.Tensor> {
    const lifecycle = this.#parts.step;
    const step = lifecycle.current;
    const cached = step?.tapped.get(unit);
    if (cached !== undefined) return cached;
    const tensors = new Map<Parameter, tf.Tensor>();
    for (const handle of unit.handles) {
      handle.parameters.forEach((parameter, index) => {
        const raw = toTf(handle.unshardedView(index));
        tensors.set(parameter, step === null ? raw : lifecycle.tap(parameter, raw, step));
      });
    }
    step?.tapped.set(unit, tensors);
    return tensors;
  }
}
