import { checkOptionKeys, type ForeignNames } from '@fsdp-ts/errors';
import { FsdpError } from '../errors';

/** Throws FsdpError('unknown-option') for a key outside `known` (see [Note: option keys] in @fsdp-ts/errors). */
export function checkFsdpOptionKeys(
  where: string,
  options: unknown,
  known: Readonly<Record<string, true>>,
  foreign: ForeignNames = {},
): void {
  checkOptionKeys(where, options, known, foreign, (message, details) => {
    return new FsdpError(message, { ...details, code: 'unknown-option' });
  });
}
