import { optionKeysCheck } from '@fsdp-ts/errors';
import { LayersError } from '../errors';

/** Throws LayersError('unknown-option') for a key outside `known` (see [Note: option keys] in @fsdp-ts/errors). */
export const checkLayersOptionKeys = optionKeysCheck(
  (message, details) => new LayersError(message, { ...details, code: 'unknown-option' }),
);
