import { optionKeysCheck } from '@fsdp-ts/errors';
import { FsdpError } from '../errors';

/** Throws FsdpError('unknown-option') for a key outside `known` (see [Note: option keys] in @fsdp-ts/errors). */
export const checkFsdpOptionKeys = optionKeysCheck(
  (message, details) => new FsdpError(message, { ...details, code: 'unknown-option' }),
);
