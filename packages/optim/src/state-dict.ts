import type { HyperparameterValue } from './param-group';

/** The state of one parameter in a state dict. Buffers are copies, never aliases of live state. */
export interface ParameterStateEntry {
  /** The parameter's name when it was saved ('' if it had none); checked on load when both are set. */
  name: string;
  /** The parameter's original shape; checked on load. */
  shape: number[];
  /** Elements of `param.data` the buffers cover (the shard size when saved from a sharded rank). */
  numel: number;
  step: number;
  /** e.g. `expAvg`, `expAvgSq`, `maxExpAvgSq`, `momentumBuffer`; each has `numel` elements. */
  buffers: Record<string, Float32Array>;
}

export interface SavedParamGroup {
  hyperparameters: Record<string, HyperparameterValue>;
  /** Positions of the group's parameters across all groups, in order (PyTorch's integer keys). */
  params: number[];
  /** The same parameters' names ('' where unnamed). */
  paramNames: string[];
}

/**
 * An optimizer's state, keyed by parameter position (the order of `paramGroups` then `params`), with
 * names alongside so a load into a differently built optimizer is caught.
 */
export interface OptimizerStateDict {
  format: 'fsdp-ts/optim-state@1';
  /** The optimizer that saved it (`SGD`, `Adam`, `AdamW`, `LAMB`, `LARS`). */
  optimizer: string;
  state: Record<number, ParameterStateEntry>;
  paramGroups: SavedParamGroup[];
}
