import { randomStatefulModules } from '@fsdp-ts/nn';
import { type Parameter, ReleasableTensor, toTf } from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
import type { ResolvedFsdpOptions } from '../options';
import { policyMatches } from '../wrap-policy';
import type { FsdpUnit, UnitLocation } from './fsdp-unit';
import type { StepLifecycle } from './step-lifecycle';
import type { RecomputingUnitHooks } from './unit-function';
import type { UnitGathering } from './unit-gathering';

/**
 * The units whose forward is recomputed in backward (activation checkpointing): every non-root
 * unit under a preset with `recompute`, else the ones `activationCheckpointing` selects.
 */
export function recomputedUnits(
  units: readonly FsdpUnit[],
  options: ResolvedFsdpOptions,
): ReadonlySet<FsdpUnit> {
  const checkpointing = options.activationCheckpointing;
  return new Set(
    units.filter(
      (unit) =>
        !unit.isRoot &&
        (options.sharding.recompute ||
          checkpointing === true ||
          (checkpointing !== false && policyMatches(checkpointing, unit.module, unit.name))),
    ),
  );
}

/** What a recomputing unit's hooks use of the wrapper. */
export interface RecomputeParts {
  readonly options: ResolvedFsdpOptions;
  readonly locations: ReadonlyMap<Parameter, UnitLocation>;
  readonly gathering: UnitGathering;
  readonly step: StepLifecycle;
}

/** The runtime around one recomputing unit's autograd boundary (see [Note: recomputing units]). */
export function recomputeHooks(unit: FsdpUnit, parts: RecomputeParts): RecomputingUnitHooks {
  const { options, locations, gathering, step } = parts;
  const created: tf.Tensor[] = [];
  return {
    gatherParameters: (phase) => {
      if (phase === 'forward') {
        step.relievePressure();
        gathering.gatherForForward(unit, step.lastOrder);
        // Each call reports its gradients (see [Note: units called more than once]).
        if (step.current !== null) unit.reduction.expectGradients(unit.trainableParameters().length);
      } else gathering.gatherForBackward(unit, step.current?.order ?? step.lastOrder);
      const tensors = new Map<Parameter, tf.Tensor>();
      for (const handle of unit.handles) {
        handle.parameters.forEach((parameter, index) => {
          const tensor = toTf(handle.unshardedView(index));
          created.push(tensor);
          tensors.set(parameter, tensor);
        });
      }
      // The backward recompute computes on the heap copies ([Note: gathered values the backend
      // holds]); every call gathers again for its own backward, so this holds for shared units too.
      if (phase === 'backward' && ReleasableTensor.backendHoldsCopies()) unit.freeGatheredValues();
      return tensors;
    },
    releaseParameters: (phase) => {
      for (const tensor of created.splice(0)) tensor.dispose();
      const { sharding } = options;
      if (!sharding.shardParameters) return;
      if (phase === 'backward' || sharding.reshardAfterForward) unit.reshard();
    },
    trainable: () => unit.trainableParameters(),
    randomLayers: () => randomStatefulModules(unit.module),
    onParameterGradients: (gradients) => {
      let last = false;
      unit.trainableParameters().forEach((parameter, index) => {
        const { handle, index: position } = locations.get(parameter)!;
        unit.reduction.write(handle, position, gradients[index]!);
        last = unit.reduction.gradientArrived();
      });
      // A unit called twice reduces after its earlier call's backward, the last one.
      if (last) step.startUnitReduction(unit);
    },
  };
}
