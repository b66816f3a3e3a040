/**
 * The error base every fsdp-ts package shares, and the check of options' keys.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/errors
 */

// Recognise any fsdp-ts error, across duplicate copies of a package; check a package's invariants.

export { FsdpTsError, type FsdpTsErrorDetails, type InvariantCheck, invariantCheck } from './fsdp-ts-error';

// Reject unknown option keys, naming the nearest one (for a package's options objects).

export {
  adviceForName,
  checkOptionKeys,
  type ForeignNames,
  nearestName,
  normalizeName,
  type OptionKeys,
  type OptionKeysCheck,
  optionKeysCheck,
  type UnknownOptionDetails,
  type UnknownOptionErrorFactory,
} from './option-keys';
