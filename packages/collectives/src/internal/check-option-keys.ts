import { checkOptionKeys, type ForeignNames } from '@fsdp-ts/errors';
import { CollectiveError } from '../errors.js';

/**
 * Throws CollectiveError('unknown-option') for a key outside `known` (see [Note: option keys] in
 * @fsdp-ts/errors). Main thread only: options are checked where they are given, before the
 * communication worker sees them.
 */
export function checkCollectiveOptionKeys(
  where: string,
  options: unknown,
  known: Readonly<Record<string, true>>,
  foreign: ForeignNames = {},
): void {
  checkOptionKeys(where, options, known, foreign, (message, details) => {
    return new CollectiveError(message, { ...details, code: 'unknown-option' });
  });
}
