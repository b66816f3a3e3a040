import { checkOptionKeys, type ForeignNames } from '@fsdp-ts/errors';
import { LayersError } from '../errors';

/** Throws LayersError('unknown-option') for a key outside `known` (see [Note: option keys] in @fsdp-ts/errors). */
export function checkLayersOptionKeys(
  where: string,
  options: unknown,
  known: Readonly<Record<string, true>>,
  foreign: ForeignNames = {},
): void {
  checkOptionKeys(where, options, known, foreign, (message, details) => {
    return new LayersError(message, { ...details, code: 'unknown-option' });
  });
}
