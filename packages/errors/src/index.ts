/**
 * The error base every fsdp-ts package shares, and the check of options' keys.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/errors
 */
export { FsdpTsError, type FsdpTsErrorDetails, type InvariantCheck, invariantCheck } from './fsdp-ts-error';
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
