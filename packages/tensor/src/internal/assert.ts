import { type InvariantCheck, invariantCheck } from '@fsdp-ts/errors';

/**
 * Checks an internal invariant. A failure is a bug in fsdp-ts, not a user error, so the message
 * prints the values involved to make the report actionable.
 */
export const assert: InvariantCheck = invariantCheck('fsdp-ts internal');
