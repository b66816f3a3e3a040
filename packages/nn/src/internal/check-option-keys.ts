import { optionKeysCheck } from '@fsdp-ts/errors';
import { NnError } from '../errors';

/** Throws NnError('unknown-option') for a key outside `known` (see [Note: option keys] in @fsdp-ts/errors). */
export const checkNnOptionKeys = optionKeysCheck(
  (message, details) => new NnError(message, { ...details, code: 'unknown-option' }),
);
