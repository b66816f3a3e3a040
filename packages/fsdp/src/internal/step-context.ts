import type { Parameter } from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
import type { FsdpUnit } from './fsdp-unit';
import type { ReleasedParametersByUnit } from './released-parameters';

/** Per-step bookkeeping while a backward() is running (forward and backward of one step). */
export interface StepContext {
  readonly anchor: tf.Tensor;
  readonly tapped: Map<FsdpUnit, Map<Parameter, tf.Tensor>>;
  /** Parameter tensors released after each unit's forward calls (reshard without recompute). */
  readonly released: ReleasedParametersByUnit;
  readonly order: FsdpUnit[]; // non-root units in the order their forward ran
  readonly sync: boolean; // false inside noSync: gradients accumulate unreduced
  readonly reducing: FsdpUnit[]; // units whose reductions are issued and not yet finished, oldest first
  /** The unit left gathered after its forward as the last of the forward order (see [Note: last unit stays gathered]). */
  keptGathered: FsdpUnit | null;
}
