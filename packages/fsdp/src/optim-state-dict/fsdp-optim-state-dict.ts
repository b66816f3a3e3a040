import type { OptimizerStateDict } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import type { Piece } from '../state-dict/pieces';

/** The `format` string of an optimizer state dict keyed by parameter names. */
export const FSDP_OPTIM_STATE_DICT_FORMAT = 'fsdp-ts/fsdp-optim-state@1';

/** What these functions need of an optimizer (every @fsdp-ts/optim optimizer has it). */
export interface StatefulOptimizer {
  readonly kind: string;
  readonly parameters: Parameter[];
  readonly paramGroups: readonly { readonly params: readonly Parameter[] }[];
  /** The optimizer's state dict. */
  stateDict(): OptimizerStateDict;
  /** Loads a state dict returned by `stateDict`. */
  loadStateDict(stateDict: OptimizerStateDict): void;
}

/** Optimizer state of one parameter: the step and, per state buffer, element ranges. */
export interface FsdpOptimParameterState {
  readonly shape: number[];
  readonly step: number;
  /** Full dicts: one piece per buffer covering the parameter; sharded: this rank's range. */
  readonly buffers: Record<string, Piece[]>;
}

/**
 * Optimizer state keyed by original parameter names, independent of the world size and
 * strategy that saved it: `fullOptimStateDict` holds whole buffers, `shardedOptimStateDict`
 * this rank's ranges (load every rank's dict to reshard).
 */
export interface FsdpOptimStateDict {
  readonly format: typeof FSDP_OPTIM_STATE_DICT_FORMAT;
  /** 'full' or 'sharded'. */
  readonly kind: 'full' | 'sharded';
  /** The optimizer class that saved it (`AdamW`, ...). */
  readonly optimizer: string;
  /** Per param group: hyperparameters and the original names of its parameters. */
  readonly paramGroups: {
    hyperparameters: OptimizerStateDict['paramGroups'][number]['hyperparameters'];
    paramNames: string[];
  }[];
  readonly state: Record<string, FsdpOptimParameterState>;
}
