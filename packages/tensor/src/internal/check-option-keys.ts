import { optionKeysCheck } from '@fsdp-ts/errors';
import { TensorError } from '../errors';

/** Throws TensorError('unknown-option') for a key outside `known` (see [Note: option keys] in @fsdp-ts/errors). */
export const checkTensorOptionKeys = optionKeysCheck(
  (message, details) => new TensorError(message, { ...details, code: 'unknown-option' }),
);
