/**
 * The building blocks @fsdp-ts/fsdp's wrapper-facing calls (saveCheckpoint, loadCheckpoint, the
 * state dicts, safetensors) are made of, as the `@fsdp-ts/checkpoint/internal` subpath. Not part
 * of the public API: names here change without a major version.
 *
 * @internal
 * @module @fsdp-ts/checkpoint/internal
 */
export { checkCheckpointOptionKeys } from '../errors';
export { fsyncDirectory } from '../format/durable-files';
export { checkReplicatedInput, type ReplicatedStateInput } from '../format/replicated-state';
export { broadcastOutcome, throwIfAnyRankFailed } from '../group-agreement';
export type { LoadBatches, OptimizerLoadTargets } from '../reader/read-checkpoint';
export {
  encodeHeader,
  readHeader,
  type SafetensorsDType,
  type SafetensorsHeader,
  type SafetensorsTensor,
  safetensorsItemSize,
} from '../safetensors/safetensors-header';
export {
  describeGroups,
  flattenOptimizerState,
  type OptimizerStateSource,
} from '../sharded-state/optimizer-state';
export {
  matchSavedParameters,
  type SavedFlatParameter,
  savedRanges,
} from '../sharded-state/saved-parameters';
export { assembleRange } from '../state-dict/state-dict-formats';
export { RankFileWriter } from '../writer/rank-file-writer';
