import { type InvariantCheck, invariantCheck } from '@fsdp-ts/errors';

/**
 * Checks an internal invariant of @fsdp-ts/flat-param. A failure is a bug in fsdp-ts, not a user
 * error, so the message prints the values involved.
 */
export const assert: InvariantCheck = invariantCheck('fsdp-ts flat-param');
