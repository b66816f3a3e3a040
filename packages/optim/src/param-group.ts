import type { OptionKeys } from '@fsdp-ts/errors';
import type { Parameter } from '@fsdp-ts/tensor';

/** A hyperparameter value: a number, a flag, or a pair of numbers (`betas`). */
export type HyperparameterValue = number | boolean | readonly [number, number];

/** The hyperparameters every optimizer has. */
export interface BaseOptions {
  /** Learning rate. LR schedules overwrite it between steps. */
  lr: number;
}

/**
 * A param group as the optimizer holds it: its parameters and every hyperparameter, filled from the
 * optimizer's defaults where the caller left one out. Hyperparameters may be changed between steps
 * (`optimizer.paramGroups[1].lr = 1e-4`); the parameter list may not.
 */
export type ParamGroup<Options extends BaseOptions> = Options & { readonly params: readonly Parameter[] };

/** What a caller passes for one group: parameters, plus the hyperparameters that differ from the defaults. */
export type ParamGroupInput<Options extends BaseOptions> = Partial<Options> & {
  params: Iterable<Parameter>;
};

/** Either a plain list of parameters (one group) or a list of groups. */
export type ParamsInput<Options extends BaseOptions> =
  | Iterable<Parameter>
  | Iterable<ParamGroupInput<Options>>;

/** Options accepted by `zeroGrad`. */
export interface ZeroGradOptions {
  /**
   * true (the default, as in PyTorch 2.x): set every `grad` to null. false: fill every grad view
   * with zeros in place (keeps the views, e.g. FSDP's sharded gradient buffer).
   */
  setToNull?: boolean;
}

/** The keys of ZeroGradOptions ([Note: option keys] in @fsdp-ts/errors). */
export const zeroGradOptionKeys = { setToNull: true } as const satisfies OptionKeys<ZeroGradOptions>;
