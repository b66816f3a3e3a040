import { checkOptionKeys, type ForeignNames } from '@fsdp-ts/errors';
import { NnError } from '../errors';

/** Throws NnError('unknown-option') for a key outside `known` (see [Note: option keys] in @fsdp-ts/errors). */
export function checkNnOptionKeys(
  where: string,
  options: unknown,
  known: Readonly<Record<string, true>>,
  foreign: ForeignNames = {},
): void {
  checkOptionKeys(where, options, known, foreign, (message, details) => {
    return new NnError(message, { ...details, code: 'unknown-option' });
  });
}
