import type { OptionKeys } from '@fsdp-ts/errors';
import type { HyperparameterValue } from './param-group';

/**
 * The state of one parameter in a state dict. Buffers are copies, never aliases of live state,
 * unless asked for with `{ copy: false }` (see [Note: state dicts without copies]).
 */
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

/** One param group in an optimizer state dict: its hyperparameters, its parameters' positions and names. */
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

/**
 * [Note: state dicts without copies]
 * `stateDict({ copy: false })` returns the live buffers instead of copies, and
 * `loadStateDict(dict, { copy: false })` keeps the dict's buffers as the state instead of copying
 * them. Both exist for checkpoints of large models, which write state from the memory it lives in
 * and read it straight into the arrays that will hold it: a copy is 8 bytes per parameter for
 * Adam, as much as the state itself. The buffers of such a dict are the optimizer's: they change
 * with every step, and whoever holds the dict must not write to them unless it means to change
 * the state.
 */
export interface StateDictOptions {
  /** Copy the buffers (default true); false aliases them (see [Note: state dicts without copies]). */
  copy?: boolean;
  /**
   * Include the buffers (default true). `stateDict({ buffers: false })` gives every entry with
   * `buffers: {}` (its step, name, shape and numel); `loadStateDict(dict, { buffers: false })`
   * loads steps and hyperparameters and leaves every parameter's buffers as they are. See
   * [Note: state dicts without buffers].
   */
  buffers?: boolean;
}

/**
 * [Note: state dicts without buffers]
 * With offloaded state ([Note: offloaded optimizer state]) the buffers live in the offload, and
 * `stateDict()` reads a copy of every one of them: the whole state in memory at once. A
 * checkpoint of such an optimizer takes the dict without buffers (steps and hyperparameters) and
 * streams the buffers from the offload itself, a chunk at a time; loading gives the steps with
 * `{ buffers: false }` and writes the buffers into the offload the same way.
 */

/** The keys of StateDictOptions ([Note: option keys] in @fsdp-ts/errors). */
export const stateDictOptionKeys = {
  copy: true,
  buffers: true,
} as const satisfies OptionKeys<StateDictOptions>;
