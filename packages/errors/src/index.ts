// @fsdp-ts/errors: the error base every fsdp-ts package shares.
export { FsdpTsError, type FsdpTsErrorDetails } from './fsdp-ts-error';
