import { optionKeysCheck } from '@fsdp-ts/errors';
import { CollectiveError } from '../errors.js';

/**
 * Throws CollectiveError('unknown-option') for a key outside `known` (see [Note: option keys] in
 * @fsdp-ts/errors). Main thread only: options are checked where they are given, before the
 * communication worker sees them.
 */
export const checkCollectiveOptionKeys = optionKeysCheck(
  (message, details) => new CollectiveError(message, { ...details, code: 'unknown-option' }),
);
