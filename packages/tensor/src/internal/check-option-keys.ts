import { checkOptionKeys, type ForeignNames } from '@fsdp-ts/errors';
import { TensorError } from '../errors';

/** Throws TensorError('unknown-option') for a key outside `known` (see [Note: option keys] in @fsdp-ts/errors). */
export function checkTensorOptionKeys(
  where: string,
  options: unknown,
  known: Readonly<Record<string, true>>,
  foreign: ForeignNames = {},
): void {
  checkOptionKeys(where, options, known, foreign, (message, details) => {
    return new TensorError(message, { ...details, code: 'unknown-option' });
  });
}
