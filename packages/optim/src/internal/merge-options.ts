import { checkOptionKeys, type ForeignNames } from '@fsdp-ts/errors';
import { OptimError } from '../errors';

/**
 * The hyperparameter names of torch.optim, timm and tfjs's optimizers that differ from fsdp-ts's,
 * with what to write instead. snake_case spellings of fsdp-ts's own names (`weight_decay`,
 * `trust_coefficient`) are found by the nearest-key rule and need no entry.
 */
export const foreignHyperparameterNames: ForeignNames = {
  learning_rate: 'lr here (as in torch.optim)',
  beta1: 'betas: [beta1, beta2] here (as in torch.optim)',
  beta2: 'betas: [beta1, beta2] here (as in torch.optim)',
  epsilon: 'eps here (as in torch.optim)',
  decoupled_weight_decay: 'no such option: use AdamW for decoupled weight decay, Adam for L2',
  trust_coeff: "timm's trust_coeff is trustCoefficient here",
  eta: "LARS's η is trustCoefficient here",
  max_grad_norm: 'no such option: clip before step() (clipGradNorm from @fsdp-ts/fsdp clips across shards)',
  foreach:
    'no equivalent: the update is always one fused loop per parameter (WebAssembly SIMD where available)',
  fused:
    'no equivalent: the update is always one fused loop per parameter (WebAssembly SIMD where available)',
  capturable: 'no equivalent (no CUDA graphs here)',
  differentiable: 'no equivalent: the step is not part of autograd',
  process_group: 'group here (LAMB and LARS: the group the parameters are sharded over)',
};

/** Throws OptimError(code) for a key outside `known` (see [Note: option keys] in @fsdp-ts/errors). */
export function checkOptimKeys(
  where: string,
  options: unknown,
  known: readonly string[] | Readonly<Record<string, true>>,
  code: 'unknown-hyperparameter' | 'unknown-option',
  foreign: ForeignNames = foreignHyperparameterNames,
): void {
  checkOptionKeys(
    where,
    options,
    known,
    foreign,
    (message, details) => new OptimError(message, { ...details, code }),
  );
}

/**
 * The defaults overridden by the options the caller set. Keys set to undefined keep the default;
 * unknown keys (a typo, PyTorch's snake_case) are an error, undefined or not, rather than
 * silently ignored (`extraKeys`: constructor options that are not hyperparameters, like `group`).
 */
export function mergeOptions<Options extends object>(
  kind: string,
  defaults: Readonly<Options>,
  options: Partial<Options>,
  extraKeys: readonly string[] = [],
): Options {
  checkOptimKeys(kind, options, [...Object.keys(defaults), ...extraKeys], 'unknown-hyperparameter');
  const merged: Record<string, unknown> = { ...defaults };
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined || extraKeys.includes(key)) continue;
    merged[key] = value;
  }
  return merged as Options;
}
