import { OptimError } from '../errors';

/**
 * The defaults overridden by the options the caller set. Keys set to undefined keep the default;
 * unknown keys (a typo, or PyTorch's snake_case) are an error rather than silently ignored.
 */
export function mergeOptions<Options extends object>(
  kind: string,
  defaults: Readonly<Options>,
  options: Partial<Options>,
): Options {
  const merged: Record<string, unknown> = { ...defaults };
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue;
    if (!(key in defaults)) {
      throw new OptimError(`${kind}: unknown option '${key}'.`, {
        code: 'unknown-hyperparameter',
        expected: Object.keys(defaults),
        actual: key,
        fix: 'use the camelCase names listed (e.g. weightDecay, not weight_decay).',
      });
    }
    merged[key] = value;
  }
  return merged as Options;
}
