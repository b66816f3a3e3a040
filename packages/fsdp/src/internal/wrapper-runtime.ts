import type { OffloadedOptimizerState } from '../offload/offloaded-optimizer-state';
import type { FsdpUnit } from './fsdp-unit';
import type { TrainingStateMachine } from './training-state';

/**
 * The key of the wrapper's runtime, for this package's own modules (summonFullParams, state dicts,
 * safetensors export) that gather and reshard units. Not exported from the package: outside it,
 * `units` are read-only FsdpUnitViews and the training state changes only through the wrapper.
 */
export const fsdpRuntime: unique symbol = Symbol('fsdp-ts.runtime');

export interface WrapperRuntime {
  /** The root unit first, then the wrap policy's units in traversal order. */
  readonly units: readonly FsdpUnit[];
  readonly training: TrainingStateMachine;
  /** The optimizer state's store when `offload.optimizerState` is not 'none' (checkpoints stream from it). */
  readonly optimizerStateOffload: OffloadedOptimizerState | null;
}
